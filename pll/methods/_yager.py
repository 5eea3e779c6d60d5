"""Yager's rule for DST-PLL, exact and compiled: the combination step of every query.

A query's candidate set ``s̃`` and its neighbors' bags are bitsets (uint64
words, bit ``y % 64`` of word ``y // 64`` is label ``y``), so any number of
classes fits.  An informative neighbor (``∅ ≠ s̃ ∩ s_i ≠ s̃``) contributes the
bpa ``{s̃: 1/2, s̃ ∩ s_i: 1/2}``; neighbors whose restricted bags coincide are
folded in together (``c`` identical bags keep a focal set ``A`` with mass
``2^-c`` and move ``1 - 2^-c`` of it to ``A ∩ s_i``).  The focal sets live in a
hash table (entries stamped with their query, so one table serves all
queries of a call), so equal intersections merge as Yager's rule prescribes
and no Python object is built per query.  The helpers are inlined and the
hot loop indexes 2-d arrays instead of taking row views: array views and
calls cost reference counting, which dominated the run time.  Every mass is a multiple of ``2^-k``: the arithmetic is exact in
float64 for ``k <= 52``, so there is no pruning and no rounding.

For the reasons of a rejection (:mod:`pll.methods.reasons`) the kernel also reports,
per query, the conflict ``K = m∩(∅)`` (the mass it moves onto ``s̃``) and the
number of informative neighbors ``j``; the mass the unnormalised combination
leaves on ``s̃`` is then ``2^-j`` (every informative bpa keeps half of it
there, an uninformative one all of it), so ``m̃(s̃) = K + 2^-j``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

from ..neighbors.result import check_indices

# Masses are multiples of 2**-k, exact in float64 (53-bit significand) up to this k.
MAX_EXACT_NEIGHBORS = 52

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_S2 = np.uint64(2)
_S4 = np.uint64(4)
_S29 = np.uint64(29)
_S56 = np.uint64(56)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_HASH_SEED = np.uint64(0x9E3779B97F4A7C15)
_HASH_MUL = np.uint64(0xBF58476D1CE4E5B9)


def pack_bags(S):
    """Bool matrix of shape (n, l) -> uint64 bitsets of shape (n, ceil(l / 64))."""
    S = np.asarray(S, dtype=bool)
    n, n_classes = S.shape
    n_words = max(1, -(-n_classes // 64))
    padded = np.zeros((n, 64 * n_words), dtype=bool)
    padded[:, :n_classes] = S
    return np.ascontiguousarray(np.packbits(padded, axis=1, bitorder="little").view("<u8"))


def combine(indices, bag_bits, query_bits, n_classes, *, evidence=False):
    """Combine each query's neighbor bpas with Yager's rule over its ``s̃``.

    Parameters
    ----------
    indices : int array of shape (n, k)
        Neighbor rows (into ``bag_bits``) of each query.
    bag_bits : uint64 array of shape (n_train, w)
        Packed training bags (:func:`pack_bags`).
    query_bits : uint64 array of shape (n, w)
        Packed candidate sets ``s̃``, none of them empty.
    n_classes : int

    Returns
    -------
    beliefs : ndarray of shape (n, l)
        ``m̃({y})``.
    plausibilities : ndarray of shape (n, l)
        ``Σ_{A ∋ y} m̃(A)``.
    fallback : bool ndarray of shape (n, l)
        Where no singleton has mass: the focal set of largest mass (ties:
        smallest, then lexicographically smallest sorted labels); else empty.
    conflict : ndarray of shape (n,)
        Only with ``evidence``: ``m∩(∅)``, the mass moved onto ``s̃``.
    informative : int64 ndarray of shape (n,)
        Only with ``evidence``: the neighbors with ``∅ ≠ s̃ ∩ s_i ≠ s̃``.
    """
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    check_indices(indices, len(bag_bits))
    n = indices.shape[0]
    beliefs = np.zeros((n, n_classes))
    plausibilities = np.zeros((n, n_classes))
    fallback = np.zeros((n, n_classes), dtype=np.bool_)
    conflict = np.empty(n)
    informative = np.empty(n, dtype=np.int64)
    _combine_kernel(
        indices,
        np.ascontiguousarray(bag_bits, dtype=np.uint64),
        np.ascontiguousarray(query_bits, dtype=np.uint64),
        beliefs,
        plausibilities,
        fallback,
        conflict,
        informative,
    )
    if evidence:
        return beliefs, plausibilities, fallback, conflict, informative
    return beliefs, plausibilities, fallback


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> _U1) & _M1)
    x = (x & _M2) + ((x >> _S2) & _M2)
    x = (x + (x >> _S4)) & _M4
    return np.int64((x * _H01) >> _S56)


@njit(cache=True, nogil=True, inline="always")
def _slot(bits, row, mask):
    h = _HASH_SEED
    for w in range(bits.shape[1]):
        h = (h ^ bits[row, w]) * _HASH_MUL
        h = h ^ (h >> _S29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True, nogil=True, inline="always")
def _same(a, row_a, b, row_b):
    for w in range(a.shape[1]):
        if a[row_a, w] != b[row_b, w]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _find(states, row, slot_state, slot_stamp, stamp):
    """The slot of the stored state equal to ``states[row]`` and that state, or the free slot for it and -1."""
    mask = slot_state.shape[0] - 1
    slot = _slot(states, row, mask)
    while slot_stamp[slot] == stamp:
        st = slot_state[slot]
        if _same(states, st, states, row):
            return slot, st
        slot = (slot + 1) & mask
    return slot, -1


@njit(cache=True, nogil=True)
def _rehash(states, n_states, capacity, stamp):
    slot_state = np.empty(capacity, dtype=np.int64)
    slot_stamp = np.zeros(capacity, dtype=np.int64)
    for st in range(n_states):
        slot, _ = _find(states, st, slot_state, slot_stamp, stamp)
        slot_state[slot] = st
        slot_stamp[slot] = stamp
    return slot_state, slot_stamp


@njit(cache=True, nogil=True, inline="always")
def _less_lex(a, row_a, b, row_b):
    """For bitsets of equal size: is ``a[row_a]``'s sorted label tuple lexicographically below ``b[row_b]``'s?"""
    for w in range(a.shape[1]):
        diff = a[row_a, w] ^ b[row_b, w]
        if diff != _U0:
            lowest = diff & (~diff + _U1)
            return (a[row_a, w] & lowest) != _U0
    return False


@njit(cache=True, nogil=True, inline="always")
def _lowest_label(x, word):
    """The label of the lowest set bit of the non-zero word ``x`` (word number ``word``)."""
    return 64 * word + _popcount((x & (~x + _U1)) - _U1)


# Explicit types compile the kernel on import, not on a first call inside concurrent task threads
# (see pll/neighbors/screening.py); the inputs are typed readonly, so that readonly arrays (a
# memory-mapped model) pass too.
@njit(
    types.void(
        types.Array(types.int64, 2, "C", readonly=True),
        types.Array(types.uint64, 2, "C", readonly=True),
        types.Array(types.uint64, 2, "C", readonly=True),
        types.float64[:, ::1],
        types.float64[:, ::1],
        types.boolean[:, ::1],
        types.float64[::1],
        types.int64[::1],
    ),
    cache=True,
    nogil=True,
)
def _combine_kernel(indices, bag_bits, query_bits, beliefs, plausibilities, fallback, conflict, informative):
    n, k = indices.shape
    n_words = query_bits.shape[1]
    # Row n_groups of `groups` and row n_states of `states` are scratch space for the next candidate.
    groups = np.empty((k + 1, n_words), dtype=np.uint64)
    counts = np.empty(k + 1, dtype=np.int64)
    states = np.empty((64, n_words), dtype=np.uint64)
    masses = np.empty(64, dtype=np.float64)
    slot_state = np.empty(128, dtype=np.int64)
    slot_stamp = np.zeros(128, dtype=np.int64)
    for q in range(n):
        # Informative neighbors, grouped by their bag restricted to s̃.
        n_groups = 0
        for i in range(k):
            bag = indices[q, i]
            nonempty = False
            full = True
            for w in range(n_words):
                r = bag_bits[bag, w] & query_bits[q, w]
                groups[n_groups, w] = r
                nonempty = nonempty or r != _U0
                full = full and r == query_bits[q, w]
            if not nonempty or full:
                continue
            found = False
            for g in range(n_groups):
                if _same(groups, g, groups, n_groups):
                    counts[g] += 1
                    found = True
                    break
            if not found:
                counts[n_groups] = 1
                n_groups += 1
        n_informative = 0
        for g in range(n_groups):
            n_informative += counts[g]
        informative[q] = n_informative

        # Yager's rule: the focal sets start as {s̃: 1}; fold in one group at a time.
        stamp = q + 1
        for w in range(n_words):
            states[0, w] = query_bits[q, w]
        masses[0] = 1.0
        slot, _ = _find(states, 0, slot_state, slot_stamp, stamp)
        slot_state[slot] = 0
        slot_stamp[slot] = stamp
        n_states = 1
        for g in range(n_groups):
            keep = 0.5 ** counts[g]
            move = 1.0 - keep
            # A fold at most doubles the focal sets: grow the arrays (with a scratch row) and the table
            # (to stay at most half full) first, so that the hot loop below never reallocates.
            if 2 * n_states + 1 > states.shape[0]:
                grown = np.empty((4 * n_states + 1, n_words), dtype=np.uint64)
                grown[:n_states] = states[:n_states]
                grown_masses = np.empty(4 * n_states + 1, dtype=np.float64)
                grown_masses[:n_states] = masses[:n_states]
                states, masses = grown, grown_masses
            if 4 * n_states > slot_state.shape[0]:
                capacity = slot_state.shape[0]
                while capacity < 4 * n_states:
                    capacity *= 2
                slot_state, slot_stamp = _rehash(states, n_states, capacity, stamp)
            for st in range(n_states):
                inside = True
                for w in range(n_words):
                    x = states[st, w] & groups[g, w]
                    states[n_states, w] = x
                    inside = inside and x == states[st, w]
                if inside:  # A ⊆ s_i: A ∩ s_i = A keeps all its mass.
                    continue
                mass = masses[st]
                masses[st] = mass * keep
                slot, target = _find(states, n_states, slot_state, slot_stamp, stamp)
                if target < 0:
                    target = n_states
                    masses[target] = 0.0
                    n_states += 1
                    slot_state[slot] = target
                    slot_stamp[slot] = stamp
                masses[target] += mass * move

        # The conflict (mass of ∅) goes to s̃, which is state 0.
        states[n_states] = _U0
        _, void = _find(states, n_states, slot_state, slot_stamp, stamp)
        conflict[q] = 0.0
        if void > 0:
            conflict[q] = masses[void]
            masses[0] += masses[void]
            masses[void] = 0.0

        has_singleton = False
        best = -1
        best_size = 0
        for st in range(n_states):
            mass = masses[st]
            if mass == 0.0:
                continue
            size = 0
            for w in range(n_words):
                x = states[st, w]
                size += _popcount(x)
                while x != _U0:
                    plausibilities[q, _lowest_label(x, w)] += mass
                    x &= x - _U1
            if size == 1:
                has_singleton = True
                for w in range(n_words):
                    if states[st, w] != _U0:
                        beliefs[q, _lowest_label(states[st, w], w)] = mass
            if (
                best < 0
                or mass > masses[best]
                or (mass == masses[best] and size < best_size)
                or (mass == masses[best] and size == best_size and _less_lex(states, st, states, best))
            ):
                best = st
                best_size = size
        if not has_singleton:
            for w in range(n_words):
                x = states[best, w]
                while x != _U0:
                    fallback[q, _lowest_label(x, w)] = True
                    x &= x - _U1
