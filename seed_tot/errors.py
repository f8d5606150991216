"""User-facing errors: each carries one sentence that says what went wrong and what to do."""


class SeedTotError(Exception):
    """An error the user can fix; the CLI prints its message alone and exits with code 2."""


class ModelNotFoundError(SeedTotError):
    pass


class TokenizerMismatchError(SeedTotError):
    pass


class ChecksumMismatchError(SeedTotError):
    pass


class ConfigError(SeedTotError):
    pass


class NumericOverflowError(SeedTotError):
    pass


class WorkerError(SeedTotError):
    """A scheduler worker process died or raised; the message carries the worker's own error."""


class EngineError(SeedTotError):
    """An inference server (llama.cpp, vLLM, SGLang) is unreachable, too slow, or answers wrongly."""
