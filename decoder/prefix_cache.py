"""Radix prefix cache over token ids, holding paged KV, with LRU eviction under a byte budget.

Verbs (after SGLang's radix cache): `match` the longest cached prefix, `insert` a sequence's pages,
`evict` least recently used leaves. Keys are cut on a page grid (`page_size` tokens), so every node holds
whole pages and a match is always a whole number of pages. Pages are opaque to the tree: anything with a
byte size (the engine stores one tensor [layers, 2, kv_heads, page_size, head_dim] per page), which lets
tests drive the cache with token lists alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Page = Any


@dataclass
class CacheStats:
    lookups: int = 0
    hits: int = 0  # lookups that reused at least one page
    queried_tokens: int = 0
    matched_tokens: int = 0
    inserted_pages: int = 0
    evicted_pages: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    @property
    def token_hit_rate(self) -> float:
        return self.matched_tokens / self.queried_tokens if self.queried_tokens else 0.0


@dataclass(eq=False)
class _Node:
    key: tuple[int, ...]  # tokens on the edge into this node, a multiple of page_size
    pages: list[Page]
    parent: _Node | None
    children: dict[tuple[int, ...], _Node] = field(default_factory=dict)  # by first page of the child key
    last_used: int = 0


@dataclass
class PrefixMatch:
    length: int  # matched tokens (a multiple of page_size)
    pages: list[Page]


class RadixPrefixCache:
    def __init__(
        self, page_size: int = 16, byte_budget: int = 256 << 20, page_bytes: Callable[[Page], int] | None = None
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        self.page_size = page_size
        self.byte_budget = byte_budget
        self._page_bytes = page_bytes or _tensor_bytes
        self._root = _Node(key=(), pages=[], parent=None)
        self._clock = itertools.count(1)
        self.bytes_used = 0
        self.stats = CacheStats()

    # -- public verbs ---------------------------------------------------------------------------------

    def match(self, tokens: Sequence[int]) -> PrefixMatch:
        """Longest cached prefix of `tokens` on the page grid; marks the path as recently used."""
        self.stats.lookups += 1
        self.stats.queried_tokens += len(tokens)
        node, pages, depth = self._root, [], 0
        now = next(self._clock)
        while True:
            child = node.children.get(self._page_at(tokens, depth))
            if child is None:
                break
            shared = self._shared_pages(child.key, tokens, depth)
            child.last_used = now
            pages.extend(child.pages[:shared])
            depth += shared * self.page_size
            if shared < len(child.pages):
                break
            node = child
        if pages:
            self.stats.hits += 1
            self.stats.matched_tokens += depth
        return PrefixMatch(length=depth, pages=pages)

    def insert(self, tokens: Sequence[int], make_page: Callable[[int], Page]) -> int:
        """Cache the whole pages of `tokens`. `make_page(i)` builds page i (tokens [i*P, (i+1)*P)); it is
        called only for pages not already cached. Returns the number of new pages."""
        n_pages = len(tokens) // self.page_size
        node, depth, now = self._root, 0, next(self._clock)
        while depth < n_pages * self.page_size:
            first = self._page_at(tokens, depth)
            child = node.children.get(first)
            if child is None:
                new_pages = self._pages_that_fit(node, depth // self.page_size, n_pages, make_page)
                if not new_pages:
                    return 0
                end = depth + len(new_pages) * self.page_size
                leaf = _Node(key=tuple(tokens[depth:end]), pages=new_pages, parent=node, last_used=now)
                node.children[first] = leaf
                self._account(new_pages, +1)
                self.stats.inserted_pages += len(new_pages)
                self.evict(protect=leaf)
                return len(new_pages)
            shared = self._shared_pages(child.key, tokens, depth)
            if shared < len(child.pages):
                child = self._split(child, shared)
            child.last_used = now
            node, depth = child, depth + shared * self.page_size
        return 0

    def evict(self, protect: _Node | None = None) -> None:
        """Drop least recently used leaves until the pages fit the byte budget (never `protect`'s path)."""
        protected = set()
        while protect is not None:
            protected.add(id(protect))
            protect = protect.parent
        while self.bytes_used > self.byte_budget:
            leaves = [n for n in self._iter_nodes() if not n.children and id(n) not in protected]
            if not leaves:
                break
            victim = min(leaves, key=lambda n: n.last_used)
            self._remove_leaf(victim)

    def clear(self) -> None:
        self._root.children.clear()
        self.bytes_used = 0

    @property
    def cached_pages(self) -> int:
        return sum(len(n.pages) for n in self._iter_nodes())

    # -- internals ------------------------------------------------------------------------------------

    def _page_at(self, tokens: Sequence[int], start: int) -> tuple[int, ...] | None:
        page = tuple(tokens[start : start + self.page_size])
        return page if len(page) == self.page_size else None

    def _shared_pages(self, key: tuple[int, ...], tokens: Sequence[int], start: int) -> int:
        shared, p = 0, self.page_size
        for i in range(len(key) // p):
            if tuple(tokens[start + i * p : start + (i + 1) * p]) != key[i * p : (i + 1) * p]:
                break
            shared += 1
        return shared

    def _split(self, node: _Node, n_pages: int) -> _Node:
        """Cut `node`'s edge after `n_pages` pages; returns the new upper node."""
        cut = n_pages * self.page_size
        upper = _Node(key=node.key[:cut], pages=node.pages[:n_pages], parent=node.parent, last_used=node.last_used)
        assert node.parent is not None
        node.parent.children[node.key[: self.page_size]] = upper
        node.key, node.pages, node.parent = node.key[cut:], node.pages[n_pages:], upper
        upper.children[node.key[: self.page_size]] = node
        return upper

    def _pages_that_fit(self, node: _Node, first: int, stop: int, make_page: Callable[[int], Page]) -> list[Page]:
        """Pages first..stop-1 below `node`, as many as the budget can hold beside the pages on `node`'s path
        (which the new leaf keeps alive): a prompt longer than the whole budget caches its start, and no page
        is built only to be dropped."""
        page = make_page(first)
        path_bytes, up = 0, node
        while up is not None:
            path_bytes += sum(self._page_bytes(p) for p in up.pages)
            up = up.parent
        room = (self.byte_budget - path_bytes) // max(1, self._page_bytes(page))
        count = min(stop - first, room)
        return [page, *(make_page(i) for i in range(first + 1, first + count))] if count > 0 else []

    def _remove_leaf(self, leaf: _Node) -> None:
        assert leaf.parent is not None
        del leaf.parent.children[leaf.key[: self.page_size]]
        self._account(leaf.pages, -1)
        self.stats.evicted_pages += len(leaf.pages)

    def _account(self, pages: list[Page], sign: int) -> None:
        self.bytes_used += sign * sum(self._page_bytes(p) for p in pages)

    def _iter_nodes(self):
        stack = list(self._root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())


def _tensor_bytes(page: Page) -> int:
    return int(page.numel() * page.element_size())
