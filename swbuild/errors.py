"""Errors that reach the user: one line that names the file, line, op or kernel."""


class SwbuildError(Exception):
    """Base class; `str()` is the message printed by the CLI and SCons."""


class RecipeError(SwbuildError):
    def __init__(self, path, line, field, message):
        self.path, self.line, self.field = path, line, field
        where = (f"{path}:{line}" if line else str(path)) if path else ""
        text = f"{field}: {message}" if field else message
        super().__init__(f"{where}: {text}" if where else text)


class ModelError(SwbuildError):
    """A model the frontend cannot take (corrupt file, dynamic dims without shapes...)."""


class UnsupportedError(SwbuildError):
    """A valid model that uses a feature swbuild rejects on purpose; `reason` is stable text."""

    def __init__(self, reason):
        self.reason = reason
        super().__init__(reason)


class ToolchainError(SwbuildError):
    """A missing or misconfigured compiler or toolchain file."""


class LdmError(SwbuildError):
    """A kernel whose working set cannot fit the local memory at all."""

    def __init__(self, kernel, needed, budget):
        self.kernel, self.needed, self.budget = kernel, needed, budget
        super().__init__(f"kernel {kernel}: needs at least {needed} bytes of local memory per core, budget is {budget} bytes")
