"""One side's figures of an evaluation through the CLI, as the benches'
children return them (``bench.harness.evaluation``), for the benches'
record tests (``from evaluation_runs import run``)."""


def run(tok_s, nll, command_s=10.0, rss=900.0):
    """An evaluation's figures: ``tok_s`` tokens/s, loss ``nll``, the
    command's ``command_s`` s and its ``rss`` MB peak."""
    return {
        "tokens_per_s": tok_s,
        "nll": nll,
        "command_s": command_s,
        "rss_mb": rss,
        "load_average": 1.0,
        "seconds": 5.0,
    }
