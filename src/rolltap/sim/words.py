"""The simulator's completion words: what its answers are made of, and the first
entries of its vocabulary (:mod:`rolltap.sim.vocab`)."""

from __future__ import annotations

__all__ = ["WORDS"]

_WORD_TEXT = """
    the of and to in is that for it as was with be by on not he this are or his from at
    which but have an they you were her she there been one all we their has would when if
    so no will more can out other into than then some could them only time these two may
    first new very after most also made any such where over like our what just about model
    token river stone cloud light green quiet north table paper window garden bright simple
    rapid signal answer number letter orange silver market winter summer valley forest
    engine planet ocean mirror basket bridge castle dragon button candle circle desert
    finger flower guitar hammer island jacket kitten ladder lemon magnet needle pepper
    pillow rocket saddle tunnel violin wallet yellow zebra anchor beacon canyon harbor
    meadow prism quartz ribbon saturn timber velvet walnut glacier lantern marble
"""
WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())
