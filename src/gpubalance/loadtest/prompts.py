"""Deterministic prompts whose token count is about a target, for common tokenizers.

The text is a run of very common lower-case English words, each of which is a single token
(with its leading space) in GPT-2/cl100k BPE, Llama/Mistral SentencePiece and BERT
WordPiece vocabularies, so ``n`` words are about ``n`` tokens. Each prompt starts with a
short request-specific tag (a few tokens, counted) so servers with prefix caching cannot
serve one synthesised prompt from another's cache. Chat templates add their own tokens
around the text; that overhead is the server's and is not subtracted here.
"""

from __future__ import annotations

__all__ = ["synth_prompt"]

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "it",
    "be",
    "this",
    "are",
    "have",
    "not",
    "but",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "she",
    "other",
    "its",
    "may",
    "these",
    "about",
    "into",
    "than",
    "them",
    "time",
    "only",
    "new",
    "some",
    "could",
    "up",
    "after",
    "first",
    "two",
    "any",
    "most",
    "also",
    "made",
    "over",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
]


def synth_prompt(target_tokens: int, tag: int) -> str:
    """Return text of about ``target_tokens`` tokens (>= 1), unique per ``tag``.

    The tag is written as ``"request <tag>:"``: 3-4 tokens in BPE/WordPiece vocabularies
    (digits in groups of three; Llama splits every digit, a few tokens more); the words
    after it fill the rest. Same (target, tag), same text.
    """
    head = f"request {tag}:"
    n_head = 2 + max(1, (len(str(tag)) + 2) // 3)  # "request", ":" and digit groups
    n_words = max(0, int(target_tokens) - n_head)
    k = len(_WORDS)
    start = (tag * 7919) % k
    words = [_WORDS[(start + i * 13) % k] for i in range(n_words)]
    return head + (" " + " ".join(words) if words else "")
