/* bangemu configuration: the numbers of the emulated chip.
 *
 * Every value comes from the [hardware] table of the toolchain file: each numeric key `k`
 * is passed as -DBANGEMU_<K>=<value> (booleans as 1/0) and `arch = "mtp_NNN"` as
 * -DBANGEMU_ARCH=NNN. The defaults below repeat toolchains/diannao.toml (mtp_372) so a
 * .mlu file also compiles by hand; tests compile with the toolchain's values. */
#ifndef BANGEMU_CONFIG_H
#define BANGEMU_CONFIG_H

#ifndef BANGEMU_ARCH
#define BANGEMU_ARCH 372
#endif
/* cncc defines __BANG_ARCH__ while compiling device code; generated code may test it. */
#ifndef __BANG_ARCH__
#define __BANG_ARCH__ BANGEMU_ARCH
#endif
#define BANGEMU_FLOAT_CONV (BANGEMU_ARCH >= 300) /* float __bang_conv exists from MLU3xx */

/* topology */
#ifndef BANGEMU_CLUSTERS
#define BANGEMU_CLUSTERS 4
#endif
#ifndef BANGEMU_CORES_PER_CLUSTER
#define BANGEMU_CORES_PER_CLUSTER 4
#endif
/* memories (bytes); cncc keeps *_RESERVE_BYTES of NRAM and SRAM for itself */
#ifndef BANGEMU_NRAM_BYTES
#define BANGEMU_NRAM_BYTES 786432
#endif
#ifndef BANGEMU_NRAM_RESERVE_BYTES
#define BANGEMU_NRAM_RESERVE_BYTES 131072
#endif
#ifndef BANGEMU_WRAM_BYTES
#define BANGEMU_WRAM_BYTES 1048576
#endif
#ifndef BANGEMU_WRAM_BANKS
#define BANGEMU_WRAM_BANKS 64
#endif
#ifndef BANGEMU_SRAM_BYTES
#define BANGEMU_SRAM_BYTES 4194304
#endif
#ifndef BANGEMU_SRAM_RESERVE_BYTES
#define BANGEMU_SRAM_RESERVE_BYTES 131072
#endif
/* rules (docs/diannao.md, "rules on mtp_2xx"; applied on every arch) */
#ifndef BANGEMU_VECTOR_ALIGN_BYTES
#define BANGEMU_VECTOR_ALIGN_BYTES 64
#endif
#ifndef BANGEMU_VECTOR_SIZE_MULTIPLE_BYTES
#define BANGEMU_VECTOR_SIZE_MULTIPLE_BYTES 128
#endif
#ifndef BANGEMU_WRAM_ALIGN_BYTES
#define BANGEMU_WRAM_ALIGN_BYTES 8
#endif
#ifndef BANGEMU_WRAM_SIZE_MULTIPLE_BYTES
#define BANGEMU_WRAM_SIZE_MULTIPLE_BYTES 64
#endif
#ifndef BANGEMU_NRAM2NRAM_ALIGN_BYTES
#define BANGEMU_NRAM2NRAM_ALIGN_BYTES 64
#endif
#ifndef BANGEMU_NRAM2NRAM_SIZE_MULTIPLE_BYTES
#define BANGEMU_NRAM2NRAM_SIZE_MULTIPLE_BYTES 128
#endif
#ifndef BANGEMU_CONV_CI_MULTIPLE_BYTES
#define BANGEMU_CONV_CI_MULTIPLE_BYTES 64
#endif
#ifndef BANGEMU_CONV_CO_MULTIPLE
#define BANGEMU_CONV_CO_MULTIPLE 64
#endif
#ifndef BANGEMU_POOL_C_MULTIPLE_BYTES
#define BANGEMU_POOL_C_MULTIPLE_BYTES 128
#endif
#ifndef BANGEMU_MEMCPY_MAX_SEGNUM
#define BANGEMU_MEMCPY_MAX_SEGNUM 65535
#endif
#ifndef BANGEMU_UNION_DIM_MULTIPLE
#define BANGEMU_UNION_DIM_MULTIPLE 4
#endif
/* cost model (cycles) */
#ifndef BANGEMU_VECTOR_BYTES_PER_CYCLE
#define BANGEMU_VECTOR_BYTES_PER_CYCLE 128
#endif
#ifndef BANGEMU_VECTOR_STARTUP_CYCLES
#define BANGEMU_VECTOR_STARTUP_CYCLES 16
#endif
#ifndef BANGEMU_TRANSCENDENTAL_CYCLES_PER_CHUNK
#define BANGEMU_TRANSCENDENTAL_CYCLES_PER_CHUNK 4
#endif
#ifndef BANGEMU_MEMCPY_STARTUP_CYCLES
#define BANGEMU_MEMCPY_STARTUP_CYCLES 32
#endif
#ifndef BANGEMU_GDRAM_GRANULE_BYTES
#define BANGEMU_GDRAM_GRANULE_BYTES 64
#endif
#ifndef BANGEMU_GDRAM_CYCLES_PER_GRANULE
#define BANGEMU_GDRAM_CYCLES_PER_GRANULE 4
#endif
#ifndef BANGEMU_SRAM_BYTES_PER_CYCLE
#define BANGEMU_SRAM_BYTES_PER_CYCLE 64
#endif
#ifndef BANGEMU_NRAM_BYTES_PER_CYCLE
#define BANGEMU_NRAM_BYTES_PER_CYCLE 128
#endif
#ifndef BANGEMU_STRIDED_SEGMENT_CYCLES
#define BANGEMU_STRIDED_SEGMENT_CYCLES 4
#endif
#ifndef BANGEMU_CONV_STARTUP_CYCLES
#define BANGEMU_CONV_STARTUP_CYCLES 64
#endif
#ifndef BANGEMU_CONV_FLOAT_MACS_PER_CYCLE
#define BANGEMU_CONV_FLOAT_MACS_PER_CYCLE 512
#endif
#ifndef BANGEMU_CONV_INT16_MACS_PER_CYCLE
#define BANGEMU_CONV_INT16_MACS_PER_CYCLE 2048
#endif
#ifndef BANGEMU_CONV_INT8_MACS_PER_CYCLE
#define BANGEMU_CONV_INT8_MACS_PER_CYCLE 4096
#endif
#ifndef BANGEMU_SYNC_CLUSTER_CYCLES
#define BANGEMU_SYNC_CLUSTER_CYCLES 32
#endif
#ifndef BANGEMU_SYNC_ALL_CYCLES
#define BANGEMU_SYNC_ALL_CYCLES 256
#endif
#ifndef BANGEMU_LAUNCH_CYCLES
#define BANGEMU_LAUNCH_CYCLES 5000
#endif

#ifndef BANGEMU_CORES
#define BANGEMU_CORES 16
#endif
#if BANGEMU_CORES != BANGEMU_CLUSTERS * BANGEMU_CORES_PER_CLUSTER
#error "toolchain: cores must equal clusters * cores_per_cluster"
#endif
#endif
