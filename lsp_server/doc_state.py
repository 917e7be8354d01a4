"""State that survives across requests, per document, in one bounded place: the last suggestion.

Typed-ahead reuse: when the user types exactly the start of the last suggestion, the rest of it is still
the answer, so it is served with no model run. The check compares a little text on each side of the
old cursor, not the whole document, so it stays cheap and the state stays small.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from lsp_server.postprocess import Candidate

CONTEXT_CHARS = 256  # text kept on each side of the cursor to recognise "the same place"


@dataclass(frozen=True)
class Suggestion:
    anchor: int  # document offset of the cursor the suggestion was made at
    before: str  # document text just before the anchor
    after: str  # document text just after the replaced span (what follows the cursor)
    candidate: Candidate
    window: tuple[int, int]  # the prompt window (start, end offsets) it was made from


class DocumentStates:
    def __init__(self, max_documents: int = 64) -> None:
        self.max_documents = max_documents
        self._states: OrderedDict[str, Suggestion] = OrderedDict()
        self._lock = threading.Lock()  # written from worker threads

    def __len__(self) -> int:
        return len(self._states)

    def remember(
        self, uri: str, text: str, cursor: int, cursor_end: int, candidate: Candidate, window: tuple[int, int]
    ) -> None:
        state = Suggestion(
            anchor=cursor,
            before=text[max(0, cursor - CONTEXT_CHARS) : cursor],
            after=text[cursor_end : cursor_end + CONTEXT_CHARS],
            candidate=candidate,
            window=window,
        )
        with self._lock:
            self._states[uri] = state
            self._states.move_to_end(uri)
            while len(self._states) > self.max_documents:
                self._states.popitem(last=False)

    def forget(self, uri: str) -> None:
        with self._lock:
            self._states.pop(uri, None)

    def last(self, uri: str) -> Suggestion | None:
        with self._lock:
            return self._states.get(uri)

    def typed_ahead(self, uri: str, text: str, cursor: int) -> Candidate | None:
        """The rest of the last suggestion if the text typed since it is its start (at least one char left)."""
        state = self.last(uri)
        if state is None or cursor < state.anchor:
            return None
        typed = text[state.anchor : cursor]
        suggestion = state.candidate.text
        if not suggestion.startswith(typed) or len(typed) >= len(suggestion):
            return None
        if text[state.anchor - len(state.before) : state.anchor] != state.before:
            return None
        if text[cursor : cursor + len(state.after)] != state.after:
            return None
        return Candidate(suggestion[len(typed) :], state.candidate.replace_chars)
