"""Draft tokens for speculative AR decoding by prompt lookup: code repeats itself.

The context (prompt + output so far) is indexed by its n-grams. To draft, take the context's last n tokens,
find where they last occurred earlier, and propose the tokens that followed there. The AR decoder checks a
draft in one forward pass and keeps the part the model itself would have produced (decoder/ar_decoder.py),
so a draft can only save passes, never change the output. The longest matching n-gram wins: a longer match
is a likelier continuation, and a single repeated token (`(`, `self`) is too weak a cue to spend a pass on.
"""

from __future__ import annotations


class PromptLookup:
    """An n-gram index over a growing token sequence, for drafts of what comes next."""

    def __init__(self, tokens: list[int], max_ngram: int = 3, min_ngram: int = 2) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("need 1 <= min_ngram <= max_ngram")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.tokens: list[int] = []
        # n-gram -> the position right after its latest occurrence that is followed by a token
        self.index: dict[tuple[int, ...], int] = {}
        self.extend(tokens)

    def extend(self, tokens: list[int]) -> None:
        for token in tokens:
            end = len(self.tokens)  # `token` lands here: the n-grams ending just before it now have a follower
            for n in range(self.min_ngram, min(self.max_ngram, end) + 1):
                self.index[tuple(self.tokens[end - n : end])] = end
            self.tokens.append(token)

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens that followed the latest earlier occurrence of the longest matching suffix."""
        if limit < 1:
            return []
        length = len(self.tokens)
        for n in range(min(self.max_ngram, length), self.min_ngram - 1, -1):
            start = self.index.get(tuple(self.tokens[length - n :]))
            if start is not None:
                return self.tokens[start : start + limit]
        return []
