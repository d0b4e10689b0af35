"""The engine's prefix cache: KV pages of finished requests' prompts, kept for later prompts that
start the same way (SGLang's radix cache, page-granular).

A tree of pages: each node is one full KV page (4 tokens: the page is exactly one indexer block)
under the node of the page before it, keyed by its 4 token ids. A finished request gives its
prompt's full pages to the tree (the pages it already found there go back to the pool); a new
request walks the tree along its prompt and reuses the pages it finds, so it prefills only the
rest. A page holds everything the suffix needs from the prefix: the DSA layers' K and V of its 4
positions and its compressed index key (launchers/reference/kv_pool.py). What a page holds
depends only on the tokens from the start of the prompt to its end, so two prompts that share
the page's path share its content.

Pages in use by a running request are locked (a count per node); unlocked leaves are evicted,
least recently used first, when the pool runs out of free pages.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

PageKey = tuple[int, ...]


@dataclass(eq=False)
class _Node:
    page: int  # pool page id (-1 for the root)
    parent: _Node | None
    key: PageKey = ()
    children: dict[PageKey, _Node] = field(default_factory=dict)
    locks: int = 0  # running requests that use this page
    last_used: int = 0


@dataclass(frozen=True)
class PrefixMatch:
    """The cached pages a request starts from; `nodes` stay locked until it is released."""

    pages: list[int]
    nodes: tuple[_Node, ...]

    @property
    def n_pages(self) -> int:
        return len(self.pages)


class PrefixCache:
    def __init__(self, page_size: int):
        self.page_size = page_size
        self._root = _Node(page=-1, parent=None)
        self._lock = threading.Lock()
        self._clock = itertools.count(1)
        self._n_pages = 0  # pages held by the tree
        self._n_locked = 0  # of which locked (their node's count > 0)
        self.hits = 0  # requests that reused at least one page
        self.hit_tokens = 0  # prompt tokens those requests did not prefill

    def _keys(self, tokens: list[int], n_pages: int) -> list[PageKey]:
        s = self.page_size
        return [tuple(tokens[i * s : (i + 1) * s]) for i in range(n_pages)]

    @property
    def cached_pages(self) -> int:
        with self._lock:
            return self._n_pages

    @property
    def evictable_pages(self) -> int:
        """Pages the tree could give back now (every unlocked page: eviction goes leaf by leaf)."""
        with self._lock:
            return self._n_pages - self._n_locked

    def match(self, prompt: list[int]) -> PrefixMatch:
        """The longest cached run of full pages the prompt starts with, locked for the caller.
        At least the prompt's last token is always left to prefill (it gives the first logits)."""
        usable = (len(prompt) - 1) // self.page_size
        with self._lock:
            node, nodes = self._root, []
            now = next(self._clock)
            for key in self._keys(prompt, usable):
                child = node.children.get(key)
                if child is None:
                    break
                node = child
                nodes.append(node)
            for n in nodes:
                if n.locks == 0:
                    self._n_locked += 1
                n.locks += 1
                n.last_used = now
            if nodes:
                self.hits += 1
                self.hit_tokens += len(nodes) * self.page_size
        return PrefixMatch([n.page for n in nodes], tuple(nodes))

    def release(self, hit: PrefixMatch) -> None:
        with self._lock:
            for n in hit.nodes:
                n.locks -= 1
                if n.locks == 0:
                    self._n_locked -= 1

    def insert(self, prompt: list[int], pages: list[int]) -> list[int]:
        """Give the tree a finished request's prompt pages (pages[i] holds tokens 4i..4i+3, full
        pages only). Returns the pages the tree did not take (it already held those prefixes)."""
        n = min(len(pages), len(prompt) // self.page_size)
        with self._lock:
            node, now, spare = self._root, next(self._clock), list(pages[n:])
            for i, key in enumerate(self._keys(prompt, n)):
                child = node.children.get(key)
                if child is None:
                    child = _Node(page=pages[i], parent=node, key=key)
                    node.children[key] = child
                    self._n_pages += 1
                elif child.page != pages[i]:
                    spare.append(pages[i])
                child.last_used = now
                node = child
        return spare

    def evict(self, n_pages: int) -> list[int]:
        """Up to n_pages pages taken from unlocked leaves, least recently used first."""
        freed: list[int] = []
        with self._lock:
            leaves = [n for n in self._walk() if not n.children and n.locks == 0]
            while len(freed) < n_pages and leaves:
                leaves.sort(key=lambda n: n.last_used)
                leaf = leaves.pop(0)
                assert leaf.parent is not None
                del leaf.parent.children[leaf.key]
                self._n_pages -= 1
                freed.append(leaf.page)
                parent = leaf.parent
                if parent is not self._root and not parent.children and parent.locks == 0:
                    leaves.append(parent)
        return freed

    def _walk(self) -> list[_Node]:
        out, stack = [], list(self._root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out
