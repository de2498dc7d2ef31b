"""Model names → C identifiers that are safe, deterministic and unique.

Nothing from a model file reaches the generated C except through these functions (and
`c_comment`), so a hostile tensor name can never inject text into the output.
"""
import re

_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool _Complex _Imaginary""".split())

# The DianNao host is C++; GNU C adds asm/typeof.
_CXX_KEYWORDS = frozenset("""alignas alignof and and_eq asm bitand bitor bool catch char8_t char16_t
char32_t class compl concept consteval constexpr constinit const_cast co_await co_return co_yield
decltype delete dynamic_cast explicit export false friend mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public reinterpret_cast requires static_assert
static_cast template this thread_local throw true try typeid typename using virtual wchar_t xor
xor_eq typeof __typeof__ __asm__ final override""".split())

# Macros and functions of the standard headers the generated code includes (stdio, stdlib,
# string, stdint, math, assert, errno, stdbool, stddef, float, limits, stdarg): a parameter
# with one of these names would be replaced by the preprocessor or shadow a called function.
_STD_NAMES = frozenset("""NULL EOF BUFSIZ FILENAME_MAX FOPEN_MAX L_tmpnam TMP_MAX SEEK_SET SEEK_CUR
SEEK_END stdin stdout stderr assert errno offsetof va_arg va_start va_end va_copy va_list
setjmp longjmp complex imaginary I INFINITY NAN HUGE_VAL HUGE_VALF HUGE_VALL isnan isinf isfinite
isnormal signbit fpclassify isgreater isgreaterequal isless islessequal islessgreater isunordered
EXIT_SUCCESS EXIT_FAILURE RAND_MAX MB_CUR_MAX size_t ptrdiff_t wchar_t int8_t int16_t int32_t int64_t
uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t FILE main memcpy memset memmove memcmp strlen
strcmp malloc calloc realloc free abort exit atexit printf fprintf sprintf snprintf puts fputs fopen
fclose fread fwrite fflush getenv qsort rand srand abs labs exp expf log logf sqrt sqrtf pow powf
fabs fabsf floor floorf ceil ceilf round roundf tanh tanhf erf erff sin sinf cos cosf tan tanf fmax
fmaxf fmin fminf fmod fmodf nearbyint nearbyintf rint rintf trunc truncf clock time noreturn""".split())

RESERVED = _C_KEYWORDS | _CXX_KEYWORDS | _STD_NAMES

# Namespaces of the emulation runtimes (athread, CRTS, BANG, CNRT) and the generated code's
# own helpers: a model-derived name in them could shadow or redefine a runtime symbol.
RUNTIME_PREFIXES = ("athread", "crts", "swemu", "sw_", "bang", "cnrt", "simd", "dma_", "ldm_", "slave_")

# Headers a prefix must not shadow: `<prefix>.h` sits on the include path of the build.
_HEADER_STEMS = frozenset("""math stdio stdlib string stdint stddef stdarg stdbool limits float time
signal ctype locale wchar fenv tgmath iso646 inttypes errno assert setjmp complex omp pthread unistd
athread crts dma simd slave swemu bang cnrt""".split())


def _reserved(s: str) -> bool:
    # ALL-CAPS names are where headers put their macros (E2BIG, FLT_MAX, M_PI...).
    return s in RESERVED or s.lower().startswith(RUNTIME_PREFIXES) or s.startswith("__") or s.isupper()


def c_ident(name: str, fallback: str = "t") -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name or "")
    s = re.sub(r"_+", "_", s).strip("_") or fallback
    if s[0].isdigit():
        s = "_" + s
    if _reserved(s):
        s = "x_" + s
    return s[:48]


def c_part(text: str, fallback: str = "t") -> str:
    """A sanitised piece of a longer identifier (`<prefix>_k3_` + piece): only the characters
    need care, a piece is never an identifier on its own, so no reserved-word renaming."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", text or "")).strip("_")[:48] or fallback


def c_prefix(model_name: str) -> str:
    """The prefix every symbol and file of a built model carries (`bert-base` → `bert_base`)."""
    p = c_ident(model_name, "model")
    return "x_" + p if p.lower() in _HEADER_STEMS else p


class UniqueNames:
    """Hands out distinct identifiers in first-come order (deterministic for a fixed graph)."""

    def __init__(self, reserved=(), avoid_prefix=None):
        self._used = set(reserved)
        self._given = {}
        self._avoid = avoid_prefix     # the model's own global symbols (`<prefix>_weights`...)

    def __call__(self, key: str, hint: str = None) -> str:
        if key in self._given:
            return self._given[key]
        base = c_ident(hint if hint is not None else key)
        if self._avoid and base.startswith(self._avoid):
            base = ("x_" + base)[:48]
        name, n = base, 1
        while name in self._used:
            name = f"{base}_{n}"
            n += 1
        self._used.add(name)
        self._given[key] = name
        return name


def c_comment(text: str) -> str:
    """Text safe inside /* */: printable ASCII without quotes or backslashes, no comment
    terminators (no model string ever puts a quote or a line break into the C text)."""
    s = "".join(ch if 32 <= ord(ch) < 127 and ch not in "\"'\\" else "?" for ch in str(text))
    return s.replace("*/", "* /").replace("/*", "/ *")[:120]


def c_string(text: str) -> str:
    """A C string literal holding `text` as UTF-8: printable ASCII as is, every other byte
    (and quote, backslash, '?' against trigraphs) as a three-digit octal escape."""
    out = []
    for b in str(text).encode("utf-8"):
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in "\"\\?" else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")


def model_name_problem(name):
    """Why `name` cannot name a model, or None. It becomes a directory (build/<target>/<model>)
    and file names, so it is one plain path component: no separators, no `..`, no absolute path."""
    if _MODEL_NAME.fullmatch(name) and name not in (".", ".."):
        return None
    return (f"{name!r} is not a plain model name (letters, digits and _ . + -, at most 128, "
            "not starting with . or -); it names the build directory, so it cannot be a path")
