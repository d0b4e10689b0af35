"""Filler conversation for the multi-turn suite: user/assistant exchanges about filler prose.

The filler word stream is cut into exchanges at sentence boundaries: the user shares a
passage of 3-8 sentences, the assistant answers with 1-3 sentences. render(n) uses exactly
the first n filler words; only the last exchange can be cut short (its last sentence is
closed), so more words never give a shorter conversation.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from suites.filler import FillerText
from suites.seeding import derive_rng

INTROS = (
    "Here is a passage from my notes:",
    "I wrote this down yesterday. What do you think?",
    "Another bit from the story I am drafting:",
    "Can you read this paragraph for me?",
    "This is from a letter my aunt sent:",
    "Some more of the village chronicle:",
)
OPENERS = (
    "Thanks for sharing.",
    "I enjoyed that.",
    "That is a vivid scene.",
    "Nice detail.",
    "I see.",
    "Interesting.",
)


@dataclass(frozen=True)
class Exchange:
    user_start: int  # first filler word of the user's passage
    assistant_start: int  # first filler word of the assistant's reply (= end of the passage)
    end: int  # one past the reply's last filler word
    intro: str
    opener: str


class FillerDialogue:
    """Exchanges over one FillerText, grown lazily; safe to share between recipes."""

    def __init__(self, filler: FillerText):
        self.filler = filler
        self._rng = derive_rng("dialogue", filler.seed)
        self._exchanges: list[Exchange] = []
        self._lock = threading.Lock()

    def _sentences_end(self, start: int, sentences: int) -> int:
        end = start
        for _ in range(sentences):
            end += 1
            while not self.filler.is_sentence_start(end):
                end += 1
        return end

    def exchanges(self, filler_words: int) -> list[Exchange]:
        """The exchanges that hold the first filler_words words (the last may be partial)."""
        with self._lock:
            while not self._exchanges or self._exchanges[-1].end < filler_words:
                start = self._exchanges[-1].end if self._exchanges else 0
                middle = self._sentences_end(start, self._rng.randint(3, 8))
                end = self._sentences_end(middle, self._rng.randint(1, 3))
                intro, opener = self._rng.choice(INTROS), self._rng.choice(OPENERS)
                self._exchanges.append(Exchange(start, middle, end, intro, opener))
            return [e for e in self._exchanges if e.user_start < filler_words]

    def user_text(self, exchange: Exchange, filler_words: int) -> str:
        stop = min(exchange.assistant_start, filler_words)
        return exchange.intro + "\n\n" + self.filler.closed_span(exchange.user_start, stop)

    def assistant_text(self, exchange: Exchange, filler_words: int) -> str:
        stop = min(exchange.end, filler_words)
        if stop <= exchange.assistant_start:
            return exchange.opener
        return exchange.opener + " " + self.filler.closed_span(exchange.assistant_start, stop)
