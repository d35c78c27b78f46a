"""Token-tree packing: every sequence is recoverable from its packed row, shared tokens appear once."""

import numpy as np
import pytest

from judge_reward.backends.token_tree import pack_token_tree

SEQS = [
    [5, 6, 7, 8, 9, 1, 2],
    [5, 6, 7, 8, 9, 3],
    [5, 6, 7, 8, 9, 1, 2],  # duplicate
    [5, 6, 7, 8, 9],  # a beginning of the others
    [4, 4],
    [5, 6, 1],  # shares too little to join
]


def check_recoverable(tree, seqs):
    for k, seq in enumerate(seqs):
        row, cols = tree.rows[tree.row_of[k]], tree.columns[k]
        assert [row.tokens[c] for c in cols] == list(seq)
        assert [row.depths[c] for c in cols] == list(range(len(seq)))
        assert [row.parents[c] for c in cols] == [-1] + cols[:-1]  # each token's parent is its predecessor


def test_shared_beginnings_are_stored_once_and_every_sequence_is_recoverable():
    tree = pack_token_tree(SEQS, min_shared=4, max_row_tokens=64)
    check_recoverable(tree, SEQS)
    # 5 6 7 8 9 | 1 2 | 3  in one row; [4 4] and [5 6 1] on their own
    assert sorted(len(r) for r in tree.rows) == [2, 3, 8]
    assert tree.row_of[0] == tree.row_of[1] == tree.row_of[2] == tree.row_of[3] != tree.row_of[5]
    assert tree.columns[0] == tree.columns[2]


def test_bins_lay_rows_end_to_end_without_mixing_their_attention():
    # Rows of 8, 3 and 2 tokens. When a column costs the same at any width, one bin of 13 beats two of 8.
    flat_cost = pack_token_tree(SEQS, min_shared=4, max_row_tokens=64, column_cost=lambda width: 1.0)
    check_recoverable(flat_cost, SEQS)
    assert [len(r) for r in flat_cost.rows] == [13]
    # When a column costs more in a wider bin (attention over more keys), two bins of 8 win.
    tree = pack_token_tree(SEQS, min_shared=4, max_row_tokens=64, column_cost=lambda width: width)
    check_recoverable(tree, SEQS)
    assert [len(r) for r in tree.rows] == [8, 5]  # the 2- and 3-token rows share a bin of width 8
    small = tree.rows[1]
    mask = small.ancestor_mask(6)
    first, second = tree.columns[4], tree.columns[5]
    assert mask[np.ix_(second, first)].sum() == 0 and mask[np.ix_(first, second)].sum() == 0
    assert mask[second[-1], second].all() and not mask[second[0], second[1:]].any()
    assert mask[5, 5] and mask[5].sum() == 1  # a padding column sees itself only


def test_rows_stay_within_the_length_limit_unless_nothing_is_added():
    tree = pack_token_tree(SEQS, min_shared=4, max_row_tokens=6)
    check_recoverable(tree, SEQS)
    assert tree.row_of[1] != tree.row_of[0]  # joining would make an 8-token row
    assert tree.row_of[2] == tree.row_of[0]  # a duplicate adds nothing: it always joins
    for r, row in enumerate(tree.rows):  # a row outgrows the limit only by holding one longer sequence
        assert len(row) <= max([6] + [len(s) for k, s in enumerate(SEQS) if tree.row_of[k] == r])


def test_min_shared_must_be_positive():
    with pytest.raises(ValueError, match="min_shared: .* got 0"):
        pack_token_tree(SEQS, min_shared=0, max_row_tokens=64)
