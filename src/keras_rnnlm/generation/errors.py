"""The error of a bad generation argument."""


class GenerationError(ValueError):
    """A bad argument of text generation (a sampler's parameter, a length,
    a seed, a stop token, a prompt).

    ``str(error)`` is ``"ARGUMENT DETAIL"`` (``"k must be an integer >=
    1, got 0"``).

    Attributes:
        argument: the name of the Python argument at fault (``"k"`` of
            :class:`~keras_rnnlm.generation.TopKSampler`, ``"max_tokens"``
            of ``generate``, ...), so that a command line can name its own
            flag instead (``keras-rnnlm generate`` does).
        detail: what is wrong with it (``"must be an integer >= 1, got
            0"``).
    """

    def __init__(self, argument, detail):
        super().__init__(f"{argument} {detail}")
        self.argument = argument
        self.detail = detail
