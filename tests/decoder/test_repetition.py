"""The loop detector ends a generation that repeats itself, and only that."""

from __future__ import annotations

import random

from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationControl, GenerationParams
from decoder.repetition import line_loop_cut, loop_length, stop_on_loop
from decoder.router import generate


def test_a_repeated_phrase_is_a_loop_once_it_is_long_enough():
    phrase = [7, 8, 9]  # "a list of"
    assert loop_length([1, 2] + phrase * 5) == 0  # 15 tokens: not yet
    assert loop_length([1, 2] + phrase * 6) == 3
    assert loop_length([1, 2] + phrase * 6 + [7]) == 3  # mid-copy: the tail is still periodic


def test_a_repeated_sentence_needs_three_copies():
    sentence = list(range(100, 112))
    assert loop_length(sentence * 2) == 0
    assert loop_length([5] + sentence * 3) == 12


def test_a_single_token_needs_sixteen():
    assert loop_length([3] * 15) == 0 and loop_length([1] + [3] * 16) == 1


def test_ordinary_text_is_not_a_loop():
    rng = random.Random(0)
    ids = [rng.randrange(1000) for _ in range(500)]
    assert all(loop_length(ids[:n]) == 0 for n in range(1, 501))
    # Repeats that are not back to back (a word used often) are not a loop either.
    assert loop_length([1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 7, 8, 1, 2, 9, 10, 1, 2]) == 0


def test_stop_on_loop_keeps_every_token():
    rule = stop_on_loop()
    assert rule([4, 5, 6] * 5) is None
    looped = [4, 5, 6] * 6
    assert rule(looped) == len(looped)


def test_a_looping_model_is_stopped_as_soon_as_it_loops(tiny_model_dir):
    # A random tiny model decoding greedily falls into a cycle within a few hundred tokens.
    engine = Engine.from_folder(tiny_model_dir, EngineOptions(use_prefix_cache=False))
    ids = engine.tokenizer.encode("def add(a, b):\n")
    free = generate(engine, ids, "ar", GenerationParams(max_new_tokens=400)).token_ids
    looped_at = next(n for n in range(1, len(free) + 1) if loop_length(free[:n]))
    control = GenerationControl(stop_at=stop_on_loop())
    stopped = generate(engine, ids, "ar", GenerationParams(max_new_tokens=400), control)
    assert stopped.stop_reason == "stop_rule" and stopped.token_ids == free[:looped_at]


def test_a_line_that_loops_is_cut_after_its_first_copy():
    text = '"""Return the list of a list of a list of a list of a'
    assert text[: line_loop_cut(text)] == '"""Return the list of a'
    # The run starts at the first " 1 +" (the space before it is part of it); earlier lines stay.
    assert line_loop_cut("x = f(x)\ny = g(y)\nreturn 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1") == len(
        "x = f(x)\ny = g(y)\nreturn 1 +"
    )


def test_line_loop_cut_leaves_ordinary_lines_alone():
    assert line_loop_cut("a list of a list of") is None  # two copies only
    assert line_loop_cut("# " + "=" * 60) is None  # one character repeated: a rule line
    assert line_loop_cut("print('- ' * 40, '- - - - - - - - - - - - - -')") is None  # punctuation only
    assert line_loop_cut("the list of a list of a list of a list of\nx = 1") is None  # only the last line counts
    assert line_loop_cut("result = compute(alpha, beta, gamma, delta)") is None
