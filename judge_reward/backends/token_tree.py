"""Pack sequences that share beginnings into token trees, so each shared token is computed once.

After a group's common prefix (run once, see :class:`~judge_reward.backends.hf.HFBackend`), the
rows of a group often still share beginnings with *some* of the other rows: extractive summaries
that open with the article's first sentence, GRPO completions that start alike, the same completion
sampled twice. A token's hidden state depends only on the tokens before it, so such rows can share
those tokens too: a cluster of rows becomes one packed row holding each distinct token once, laid
out as a tree (a token attends to the shared prefix and to its own ancestors only, at position
``prefix + depth``). The body and the LM head then run once per distinct token instead of once per
row and token.

This module only decides the layout; the backend turns it into ids, positions and attention masks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..candidates import common_prefix_len


@dataclass
class PackedRow:
    """Distinct tokens of a cluster of sequences, parents before children."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    """Column of each token's parent in this row; -1 for a first token (its parent is the shared prefix)."""
    depths: list[int] = field(default_factory=list)
    """Index of each token within its sequences (0 for the first token after the shared prefix)."""

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, token: int, parent: int) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(0 if parent < 0 else self.depths[parent] + 1)
        return len(self.tokens) - 1

    def ancestor_mask(self, width: int) -> np.ndarray:
        """``width x width`` booleans: column q may attend to column k (k is q or one of its ancestors).

        Columns past the row's end (padding) attend to themselves only, so no softmax row is empty.
        """
        mask = np.zeros((width, width), dtype=bool)
        for col, parent in enumerate(self.parents):
            if parent >= 0:
                mask[col] = mask[parent]
            mask[col, col] = True
        idle = np.arange(len(self.parents), width)
        mask[idle, idle] = True
        return mask


@dataclass
class TokenTree:
    rows: list[PackedRow]
    row_of: list[int]
    """Packed row holding each input sequence."""
    columns: list[list[int]]
    """Column of each input sequence's tokens in its packed row."""

    @property
    def distinct_tokens(self) -> int:
        return sum(len(r) for r in self.rows)


def pack_token_tree(
    seqs: Sequence[Sequence[int]],
    min_shared: int,
    max_row_tokens: int,
    column_cost: Callable[[int], float] | None = None,
) -> TokenTree:
    """Cluster ``seqs`` into packed rows.

    Sequences are visited in sorted order, where neighbours share the longest beginnings (the
    longest beginning a sequence shares with any earlier one is the one it shares with its sorted
    predecessor). A sequence joins its predecessor's row when they share at least ``min_shared``
    tokens and the row stays within ``max_row_tokens`` (or it adds no token at all); otherwise it
    starts a new row. Sharing a token or two is not worth it: every token of a packed row attends
    over the whole row, so packing unrelated sequences only adds masked attention work.

    With a ``column_cost`` (the cost of one token column in a batch row of a given width), short
    rows are then laid end to end (see :func:`_fill_bins`); without it every row keeps its own
    batch row (plain 2-D attention masks need that).
    """
    if min_shared < 1:
        raise ValueError(f"min_shared: expected at least 1 token, got {min_shared}")
    order = sorted(range(len(seqs)), key=lambda i: list(seqs[i]))
    rows: list[PackedRow] = []
    row_of = [0] * len(seqs)
    columns: list[list[int]] = [[] for _ in seqs]
    previous: int | None = None
    for i in order:
        seq = seqs[i]
        shared = common_prefix_len([seqs[previous], seq]) if previous is not None else 0
        joins = previous is not None and (
            shared == len(seq)
            or (shared >= min_shared and len(rows[row_of[previous]]) + len(seq) - shared <= max_row_tokens)
        )
        if joins:
            row, cols = rows[row_of[previous]], columns[previous][:shared]
        else:
            row, cols, shared = PackedRow(), [], 0
            rows.append(row)
        for token in seq[shared:]:
            cols.append(row.add(token, cols[-1] if cols else -1))
        row_of[i], columns[i] = len(rows) - 1, cols
        previous = i
    tree = TokenTree(rows, row_of, columns)
    return _fill_bins(tree, column_cost) if column_cost is not None else tree


def _first_fit(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Indices of ``lengths`` in bins of ``width``: first fit, longest first."""
    bins: list[list[int]] = []
    room: list[int] = []
    for r in sorted(range(len(lengths)), key=lambda r: -lengths[r]):
        target = next((b for b, free in enumerate(room) if lengths[r] <= free), None)
        if target is None:
            bins.append([])
            room.append(width)
            target = len(bins) - 1
        bins[target].append(r)
        room[target] -= lengths[r]
    return bins


def _fill_bins(tree: TokenTree, column_cost: Callable[[int], float]) -> TokenTree:
    """Lay packed rows end to end in bins of one width, chosen to minimise the estimated cost.

    Wider bins leave less padding but make every token attend over more (masked) columns: the
    width, between the longest row and twice that, minimises bins x width x ``column_cost(width)``.
    Each row stays its own tree (its first token's parent is the prefix, depths restart at 0), so
    the attention mask keeps the rows apart.
    """
    lengths = [len(r) for r in tree.rows]
    longest = max(lengths)
    widths = range(longest, 2 * longest + 1, max(1, longest // 16))
    width = min(widths, key=lambda w: len(_first_fit(lengths, w)) * w * column_cost(w))
    bins: list[PackedRow] = []
    placed: dict[int, tuple[int, int]] = {}  # packed row -> (bin, column offset)
    for members in _first_fit(lengths, width):
        into = PackedRow()
        for r in members:
            row, offset = tree.rows[r], len(into)
            into.tokens += row.tokens
            into.parents += [p + offset if p >= 0 else -1 for p in row.parents]
            into.depths += row.depths
            placed[r] = (len(bins), offset)
        bins.append(into)
    row_of = [placed[r][0] for r in tree.row_of]
    columns = [[c + placed[r][1] for c in cols] for r, cols in zip(tree.row_of, tree.columns)]
    return TokenTree(bins, row_of, columns)
