"""Per-row random numbers keyed by (seed, row index).

The project's convention is that the same seed gives the same result however
rows are blocked, sharded or ordered.  A generator per row would cost a Python
object per row; instead a SplitMix64 hash of (seed, row) gives an independent
uniform number per row, vectorized.
"""

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(z):
    with np.errstate(over="ignore"):
        z = z + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


MAX_SEED = 2**32 - 1
"""The largest seed that numpy's and scikit-learn's generators all take."""


def check_seed(seed, name="seed"):
    """``seed`` as an ``int`` in 0..:data:`MAX_SEED`, else one line naming ``name``.

    A run's seed also seeds scikit-learn's split and estimators, which take no larger one; the library's
    own per-row streams (:func:`seed_to_int`) take any non-negative int.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        from ..errors import InvalidParameterError

        raise InvalidParameterError(f"{name} must be a whole number in 0..{MAX_SEED}, got {seed!r}")
    return int(seed)


def seed_to_int(random_state):
    """Turn a ``random_state`` (None or int) into a non-negative int seed.

    None draws a fresh seed from the operating system, as ``random_state=None``
    means fresh randomness in scikit-learn; it is below 2**32 so that it is
    also a valid seed for scikit-learn estimators.
    """
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, (int, np.integer)) and random_state >= 0:
        return int(random_state)
    from ..errors import InvalidParameterError

    raise InvalidParameterError(
        f"random_state must be None or a non-negative int, got {random_state!r}"
    )


def row_uniform(seed, rows, stream=0):
    """Uniform numbers in [0, 1), one per entry of ``rows``, keyed by (seed, stream, row)."""
    rows = np.asarray(rows, dtype=np.uint64)
    key = _splitmix64(np.uint64(seed) ^ _splitmix64(np.uint64(stream)))
    bits = _splitmix64(rows ^ key)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def pick_among(candidates, seed, rows, stream=0):
    """For each row, pick one True column of the bool matrix ``candidates`` uniformly.

    Rows with no True column get -1.  Returns (picked column, number of choices).
    """
    candidates = np.asarray(candidates, dtype=bool)
    counts = candidates.sum(axis=1)
    u = row_uniform(seed, rows, stream)
    which = np.minimum((u * counts).astype(np.int64), np.maximum(counts - 1, 0))
    cum = np.cumsum(candidates, axis=1)
    picked = np.argmax(cum > which[:, None], axis=1)
    picked[counts == 0] = -1
    return picked, counts
