"""Errors that reach the user: one line that names the file, line, op or kernel."""


class SwbuildError(Exception):
    """Base class; `str()` is the message printed by the CLI and SCons."""


def first_line(e):
    """"Type: first line of the message" of an exception from a library: one line for a
    document's reason."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def did_you_mean(word, choices):
    """" (did you mean 'x'?)" for the closest of `choices` to a misspelt `word`, else ""."""
    import difflib
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class RecipeError(SwbuildError):
    """`file:line: field: message`. `errors` holds every error of a recipe when there are
    several (the attributes are the first one's); `str()` is then one line per error."""

    def __init__(self, path, line, field, message):
        self.path, self.line, self.field, self.message = path, line, field, message
        self.errors = [self]
        where = (f"{path}:{line}" if line else str(path)) if path else ""
        text = f"{field}: {message}" if field else message
        super().__init__(f"{where}: {text}" if where else text)

    @classmethod
    def of(cls, errors):
        """One error carrying all of `errors` (in line order; file-level ones first)."""
        errors = sorted((x for e in errors for x in e.errors), key=lambda e: e.line or 0)
        first = errors[0]
        out = cls(first.path, first.line, first.field, first.message)
        out.errors = errors
        out.args = ("\n".join(e.args[0] for e in errors),)
        return out


class ModelError(SwbuildError):
    """A model the frontend cannot take (corrupt file, dynamic dims without shapes...)."""


class UnknownInputs(ModelError):
    """Input shapes given for names the model does not have; the caller says where they came
    from (a recipe's `inputs[i].name` line, or an --input flag)."""

    def __init__(self, names, inputs, where=""):
        self.names, self.inputs, self.where = sorted(names), list(inputs), where
        head = f"{where}: " if where else ""
        super().__init__(f"{head}{', '.join(repr(n) for n in self.names)}: not an input of the model "
                         f"(inputs: {', '.join(self.inputs)})")


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
