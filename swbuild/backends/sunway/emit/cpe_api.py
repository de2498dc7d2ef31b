"""The CPE-side API of each Sunway chip as one table: how Athread v1 (SW26010) and CRTS
(SW26010-Pro) spell a DMA, a reply wait, the CPE id and a row broadcast. The model printer
(slave.py) and the SCoP printer (scop_printer.py) both print their calls from it; the MPE
side (athread_init / spawn / join / halt) is spelled the same on both chips.

Templates take {mem} (main memory), {ldm}, {len} (bytes), {bsize} (bytes per strided run),
{gap} (bytes skipped between runs), {rp} (the reply word's address); waits take {r} (the
reply word) and {n} (the count to wait for).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpeApi:
    name: str
    include: str              # the CPE header
    more_includes: tuple      # further headers a model's slave file needs
    reply: str                # the reply word's type
    tid: str                  # this CPE's id, 0..63
    get_stride: str
    get: str
    put_stride: str
    put: str
    wait: str
    stride_takes_zero_gap: bool   # a strided call with gap 0 is a plain transfer (else call `get`/`put`)
    simd_widths: tuple        # floatvN vector types of the chip
    bcast_get: str = None     # one DMA into the same LDM address of every CPE of the rows in {mask}, if any
    row_sync: str = None      # barrier of a mesh row, if any
    wait_macro: str = ""      # C lines defining the macro `wait` calls, printed after the includes
    array_sync: str = "athread_syn(ARRAY_SCOPE, 0xffff)"   # barrier of all 64 CPEs
    rma: bool = False         # shared boxes: one CPE DMAs, then RMA-broadcasts to the row/array (SW26010-Pro)


# A v1 wait spins on the reply word, which an emulator cannot see: under swbuild's emulator
# (SWEMU_REPLY_WAIT, runtime/athread) it becomes a call, where asynchronous DMA lands.
_V1_WAIT = """#ifdef SWEMU_REPLY_WAIT
#define SW_REPLY_WAIT(r, n) SWEMU_REPLY_WAIT(r, n)
#else
#define SW_REPLY_WAIT(r, n) while ((r) != (n))
#endif"""


API = {
    "athread": CpeApi(
        "athread", "#include <slave.h>", ("#include <dma.h>",), "volatile int", "athread_get_id(-1)",
        get_stride="athread_get(PE_MODE, {mem}, {ldm}, {len}, (void *){rp}, 0, {gap}, {bsize})",
        get="athread_get(PE_MODE, {mem}, {ldm}, {len}, (void *){rp}, 0, 0, 0)",
        put_stride="athread_put(PE_MODE, {ldm}, {mem}, {len}, (void *){rp}, {gap}, {bsize})",
        put="athread_put(PE_MODE, {ldm}, {mem}, {len}, (void *){rp}, 0, 0)",
        wait="SW_REPLY_WAIT({r}, {n})", stride_takes_zero_gap=True, simd_widths=(4,),
        bcast_get="athread_get(BCAST_MODE, {mem}, {ldm}, {len}, (void *){rp}, (char)({mask}), {gap}, {bsize})",
        row_sync="athread_syn(ROW_SCOPE, 0xff)", wait_macro=_V1_WAIT, array_sync="athread_syn(ARRAY_SCOPE, 0xffff)"),
    "crts": CpeApi(
        "crts", "#include <crts.h>", (), "crts_rply_t", "CRTS_tid",
        get_stride="CRTS_dma_iget_stride({ldm}, {mem}, {len}, {bsize}, {gap}, {rp})",
        get="CRTS_dma_iget({ldm}, {mem}, {len}, {rp})",
        put_stride="CRTS_dma_iput_stride({mem}, {ldm}, {len}, {bsize}, {gap}, {rp})",
        put="CRTS_dma_iput({mem}, {ldm}, {len}, {rp})",
        wait="CRTS_dma_wait_value(&{r}, {n})", stride_takes_zero_gap=False, simd_widths=(4, 8),
        row_sync="CRTS_ssync_row()", array_sync="CRTS_ssync_array()", rma=True),
}


def api_of(tc):
    """The CPE API of a toolchain (its `api`: "crts", else Athread v1)."""
    return API["crts" if tc.api == "crts" else "athread"]


def dma_call(api, direction, strided, **args):
    """One DMA call: direction "get" or "put", strided or plain, arguments as in the templates."""
    return getattr(api, f"{direction}_stride" if strided else direction).format(**args)
