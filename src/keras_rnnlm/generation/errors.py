"""The error of a bad generation argument."""


class GenerationError(ValueError):
    """A bad argument of text generation (a sampler's parameter, a length,
    a seed, a stop token, a prompt).

    Attributes:
        argument: the name of the Python argument at fault (``"k"`` of
            :class:`~keras_rnnlm.generation.TopKSampler`, ``"max_tokens"``
            of ``generate``, ...), so that a command line can name its own
            flag instead (``keras-rnnlm generate`` does).
    """

    def __init__(self, argument, message):
        super().__init__(message)
        self.argument = argument
