"""What the layers' ``get_config`` has in common."""

from keras import initializers


def serialized_initializers(layer, *names):
    """``{name: the serialized initializer layer.NAME}`` for each of
    ``names``: the initializer entries of a layer's config."""
    return {
        name: initializers.serialize(getattr(layer, name)) for name in names
    }
