"""GraphTurbo Algorithm 2: grow groups of kernels by straight, diamond and branch merges,
repeated in topological order until none applies.

  straight  A's only consumer group is B and B's only producer group is A
  diamond   A fans out and every path from A meets again at D (a residual block): A, the
            groups between them and D, when nothing between them reads or is read outside
  branch    two groups reading the same activation with no path between them (inception's
            parallel branches)

A merge is taken only under the paper's two rules, on the parts' splits (split_info.py):
  1. along every edge inside the merge, the successor's split factor is not smaller than
     its producer's (a down-sampling layer needs fewer instances than its producer: the
     group stops there and a new stage begins);
  2. the merged group's split fits local memory and its factor is not larger than the
     largest of its parts' (merging must not force finer instances than its parts had).
Kernels printed by their own module (kind != "compute") and Concat parts written in place
stay alone.
"""
from __future__ import annotations

from .kgraph import out_root
from .split_info import split_info

DIAMOND_REACH = 16      # groups after A searched for the meeting point D


class Merger:
    def __init__(self, program, kg, budget):
        self.p, self.kg, self.budget = program, kg, budget
        self.kernels = {k.name: k for k in program.kernels}
        self.order = {n: i for i, n in enumerate(kg.names)}
        self.groups = [frozenset([n]) for n in kg.names]
        self.cache = {}

    # -- the group graph ------------------------------------------------------------------
    def _index(self):
        self.of = {n: i for i, g in enumerate(self.groups) for n in g}
        self.prods = [set() for _ in self.groups]
        self.cons = [set() for _ in self.groups]
        for i, g in enumerate(self.groups):
            for n in g:
                for r in self.kg.reads[n]:
                    for p in self.kg.writers_before(n, r):
                        if self.of[p] != i:
                            self.prods[i].add(self.of[p])
                            self.cons[self.of[p]].add(i)

    def _desc(self, i):
        seen, stack = set(), [i]
        while stack:
            for c in self.cons[stack.pop()]:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return seen

    def _anc(self, i):
        seen, stack = set(), [i]
        while stack:
            for c in self.prods[stack.pop()]:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return seen

    # -- splits ---------------------------------------------------------------------------
    def kernels_of(self, members):
        return [self.kernels[n] for n in sorted(members, key=self.order.get)]

    def sinks(self, members):
        out = []
        for n in members:
            r = out_root(self.p, self.kernels[n])
            readers = self.kg.readers(r, self.p)
            if r in self.kg.graph_io or not readers or any(c not in members for c in readers):
                out.append(n)
        return frozenset(out)

    def split(self, members, limit=None):
        key = (frozenset(members), limit)
        if key not in self.cache:
            self.cache[key] = split_info(self.p, self.kernels_of(key[0]), self.sinks(key[0]), self.budget, limit)
        return self.cache[key]

    def mergeable(self, i):
        return all(self.kernels[n].kind == "compute" and not any(self.kernels[n].out_offset) for n in self.groups[i])

    def rules_hold(self, parts):
        if not all(self.mergeable(i) for i in parts):
            return None
        splits = {i: self.split(self.groups[i]) for i in parts}
        if not all(s.fits for s in splits.values()):
            return None
        for i in parts:                      # rule 1, along every edge inside the merge
            for c in self.cons[i] & set(parts):
                if splits[c].factor < splits[i].factor:
                    return None
        members = frozenset().union(*(self.groups[i] for i in parts))
        ranks = {len(self.kernels[n].axes) for n in self.sinks(members)}
        if len(ranks) != 1:
            return None
        largest = max(s.factor for s in splits.values())
        merged = self.split(members, largest)   # rule 2
        if not merged.fits or merged.factor > largest:
            return None
        self.cache[(members, None)] = merged
        return members

    # -- the three merges -----------------------------------------------------------------
    def straight(self, a):
        if len(self.cons[a]) == 1:
            (b,) = self.cons[a]
            if self.prods[b] == {a}:
                return [[a, b]]
        return []

    def diamond(self, a):
        if len(self.cons[a]) < 2:
            return []
        desc = self._desc(a)
        for d in sorted(desc)[:DIAMOND_REACH]:
            region = {a, d} | (desc & self._anc(d))
            if len(region) < 3 or not self.cons[a] <= region:
                continue
            if all(self.prods[x] <= region for x in region - {a}) and \
                    all(self.cons[x] <= region for x in region - {d}):
                return [sorted(region)]
        return []

    def branch(self, a):
        shared = {r for n in self.groups[a] for r in self.kg.reads[n]
                  if r not in self.kg.constants and not set(self.kg.writers.get(r, ())) & self.groups[a]}
        near = self._desc(a) | self._anc(a)
        return [[a, b] for b in range(a + 1, len(self.groups)) if b not in near
                and any(r in shared for n in self.groups[b] for r in self.kg.reads[n])]

    def _first_merge(self, a):
        for kind in (self.straight, self.diamond, self.branch):
            for parts in kind(a):
                members = self.rules_hold(parts)
                if members:
                    return members, parts
        return None, None

    def run(self):
        changed = True
        while changed:
            changed = False
            self._index()
            for a in range(len(self.groups)):
                members, parts = self._first_merge(a)
                if members:
                    keep = [g for i, g in enumerate(self.groups) if i not in parts]
                    keep.append(members)
                    self.groups = sorted(keep, key=lambda g: min(self.order[n] for n in g))
                    changed = True
                    break
        self._index()
        return self.groups


def merge_groups(program, kg, budget):
    """Member sets (frozensets of kernel names) in topological order, and the Merger that
    knows their splits, sinks and group graph."""
    m = Merger(program, kg, budget)
    m.run()
    return m
