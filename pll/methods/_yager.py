"""Yager's rule for DST-PLL, exact and compiled: the combination step of every query.

A query's candidate set ``s̃`` and its neighbors' bags are bitsets (uint64
words, bit ``y % 64`` of word ``y // 64`` is label ``y``), so any number of
classes fits.  An informative neighbor (``∅ ≠ s̃ ∩ s_i ≠ s̃``) contributes the
bpa ``{s̃: 1/2, s̃ ∩ s_i: 1/2}``; neighbors whose restricted bags coincide are
folded in together (``c`` identical bags keep a focal set ``A`` with mass
``2^-c`` and move ``1 - 2^-c`` of it to ``A ∩ s_i``).  The focal sets live in a
per-query hash table that is reused from query to query, so equal
intersections merge as Yager's rule prescribes and no Python object is built
per query.  Every mass is a multiple of ``2^-k``: the arithmetic is exact in
float64 for ``k <= 52``, so there is no pruning and no rounding.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Masses are multiples of 2**-k, exact in float64 (53-bit significand) up to this k.
MAX_EXACT_NEIGHBORS = 52

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_S1 = np.uint64(1)
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


def combine(indices, bag_bits, query_bits, n_classes):
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
    """
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    n = indices.shape[0]
    beliefs = np.zeros((n, n_classes))
    plausibilities = np.zeros((n, n_classes))
    fallback = np.zeros((n, n_classes), dtype=np.bool_)
    _combine_kernel(
        indices,
        np.ascontiguousarray(bag_bits, dtype=np.uint64),
        np.ascontiguousarray(query_bits, dtype=np.uint64),
        beliefs,
        plausibilities,
        fallback,
    )
    return beliefs, plausibilities, fallback


@njit(cache=True, nogil=True)
def _popcount(x):
    x = x - ((x >> _S1) & _M1)
    x = (x & _M2) + ((x >> _S2) & _M2)
    x = (x + (x >> _S4)) & _M4
    return np.int64((x * _H01) >> _S56)


@njit(cache=True, nogil=True)
def _slot(bits, mask):
    h = _HASH_SEED
    for w in range(bits.shape[0]):
        h = (h ^ bits[w]) * _HASH_MUL
        h = h ^ (h >> _S29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True, nogil=True)
def _find(key, state_bits, slot_state, slot_stamp, stamp):
    """The table slot holding ``key`` (then also its state) or the empty slot where it belongs (state -1)."""
    mask = slot_state.shape[0] - 1
    slot = _slot(key, mask)
    while slot_stamp[slot] == stamp:
        st = slot_state[slot]
        same = True
        for w in range(key.shape[0]):
            if state_bits[st, w] != key[w]:
                same = False
                break
        if same:
            return slot, st
        slot = (slot + 1) & mask
    return slot, -1


@njit(cache=True, nogil=True)
def _rehash(state_bits, n_states, capacity, stamp):
    slot_state = np.empty(capacity, dtype=np.int64)
    slot_stamp = np.zeros(capacity, dtype=np.int64)
    for st in range(n_states):
        slot, _ = _find(state_bits[st], state_bits, slot_state, slot_stamp, stamp)
        slot_state[slot] = st
        slot_stamp[slot] = stamp
    return slot_state, slot_stamp


@njit(cache=True, nogil=True)
def _less_lex(a, b):
    """For bitsets of equal size: is ``a``'s sorted label tuple lexicographically smaller than ``b``'s?"""
    for w in range(a.shape[0]):
        diff = a[w] ^ b[w]
        if diff != _U0:
            lowest = diff & (~diff + _U1)
            return (a[w] & lowest) != _U0
    return False


@njit(cache=True, nogil=True)
def _combine_kernel(indices, bag_bits, query_bits, beliefs, plausibilities, fallback):
    n, k = indices.shape
    n_words = query_bits.shape[1]
    group_bits = np.empty((max(k, 1), n_words), dtype=np.uint64)
    group_count = np.empty(max(k, 1), dtype=np.int64)
    key = np.empty(n_words, dtype=np.uint64)
    empty = np.zeros(n_words, dtype=np.uint64)
    state_bits = np.empty((64, n_words), dtype=np.uint64)
    state_mass = np.empty(64, dtype=np.float64)
    slot_state = np.empty(128, dtype=np.int64)
    slot_stamp = np.zeros(128, dtype=np.int64)
    for q in range(n):
        s = query_bits[q]
        # Informative neighbors, grouped by their bag restricted to s̃.
        n_groups = 0
        for i in range(k):
            bag = bag_bits[indices[q, i]]
            nonempty = False
            full = True
            for w in range(n_words):
                key[w] = bag[w] & s[w]
                nonempty = nonempty or key[w] != _U0
                full = full and key[w] == s[w]
            if not nonempty or full:
                continue
            found = -1
            for g in range(n_groups):
                same = True
                for w in range(n_words):
                    if group_bits[g, w] != key[w]:
                        same = False
                        break
                if same:
                    found = g
                    break
            if found >= 0:
                group_count[found] += 1
            else:
                group_bits[n_groups] = key
                group_count[n_groups] = 1
                n_groups += 1

        # Yager's rule: the focal sets start as {s̃: 1}; fold in one group at a time.
        stamp = q + 1
        state_bits[0] = s
        state_mass[0] = 1.0
        n_states = 1
        slot, _ = _find(s, state_bits, slot_state, slot_stamp, stamp)
        slot_state[slot] = 0
        slot_stamp[slot] = stamp
        for g in range(n_groups):
            keep = 0.5 ** group_count[g]
            move = 1.0 - keep
            for st in range(n_states):
                inside = True
                for w in range(n_words):
                    key[w] = state_bits[st, w] & group_bits[g, w]
                    inside = inside and key[w] == state_bits[st, w]
                if inside:  # A ⊆ s_i: A ∩ s_i = A keeps all its mass.
                    continue
                mass = state_mass[st]
                state_mass[st] = mass * keep
                slot, target = _find(key, state_bits, slot_state, slot_stamp, stamp)
                if target < 0:
                    if n_states == state_bits.shape[0]:
                        grown_bits = np.empty((2 * n_states, n_words), dtype=np.uint64)
                        grown_bits[:n_states] = state_bits
                        grown_mass = np.empty(2 * n_states, dtype=np.float64)
                        grown_mass[:n_states] = state_mass
                        state_bits, state_mass = grown_bits, grown_mass
                    target = n_states
                    state_bits[target] = key
                    state_mass[target] = 0.0
                    n_states += 1
                    if 2 * n_states > slot_state.shape[0]:
                        slot_state, slot_stamp = _rehash(state_bits, n_states, 2 * slot_state.shape[0], stamp)
                    else:
                        slot_state[slot] = target
                        slot_stamp[slot] = stamp
                state_mass[target] += mass * move

        # The conflict (mass of ∅) goes to s̃, which is state 0.
        _, void = _find(empty, state_bits, slot_state, slot_stamp, stamp)
        if void > 0:
            state_mass[0] += state_mass[void]
            state_mass[void] = 0.0

        has_singleton = False
        best = -1
        best_size = 0
        for st in range(n_states):
            mass = state_mass[st]
            if mass == 0.0:
                continue
            size = 0
            for w in range(n_words):
                x = state_bits[st, w]
                size += _popcount(x)
                while x != _U0:
                    lowest = x & (~x + _U1)
                    y = 64 * w + _popcount(lowest - _U1)
                    plausibilities[q, y] += mass
                    x ^= lowest
            if size == 1:
                has_singleton = True
                for w in range(n_words):
                    x = state_bits[st, w]
                    if x != _U0:
                        beliefs[q, 64 * w + _popcount((x & (~x + _U1)) - _U1)] = mass
            if (
                best < 0
                or mass > state_mass[best]
                or (mass == state_mass[best] and size < best_size)
                or (mass == state_mass[best] and size == best_size and _less_lex(state_bits[st], state_bits[best]))
            ):
                best = st
                best_size = size
        if not has_singleton:
            for w in range(n_words):
                x = state_bits[best, w]
                while x != _U0:
                    lowest = x & (~x + _U1)
                    fallback[q, 64 * w + _popcount(lowest - _U1)] = True
                    x ^= lowest
