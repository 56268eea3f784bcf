"""The stated-size reader and its part in the prediction (issue 23): what is read in six languages,
what is not (sizes of pasted material), the instructions of a chat request, the combination with
the model (an explicit size dominates, a cue shifts), the held-out labelled set, the work-bound
guard on the new scale, and `sjf predict`. No timing assertions (benchmarks/stated_size_latency.py)."""

from __future__ import annotations

import math

import pytest

from sjf_core.predict._estimate import CUE_SHIFT
from sjf_core.predict._predictor import load_predictor
from sjf_core.predict._stated import read_size
from sjf_core.predict._text import ScoredText, scored_text

PASTE = ("The harbour authority met on Tuesday to review the winter dredging schedule. Two of the four berths "
         "will close for six weeks, and container traffic is expected to move to the northern terminal. ") * 4


def chat(user: str, system: str | None = None) -> str:
    msgs = [{"role": "system", "content": system}] if system else []
    return scored_text({"model": "m", "messages": msgs + [{"role": "user", "content": user}]})


@pytest.mark.parametrize("text,label", [
    ("Give me a title of at most 6 words for a post about bread.", "≤ 6 words"),
    ("Describe the water cycle in 3-5 sentences.", "3–5 sentences"),
    ("Explain gravity in under 50 words.", "≤ 50 words"),
    ("Write an essay of at least 1,200 words on trains.", "≥ 1200 words"),
    ("Write a 3000-word short story about a lighthouse keeper.", "3000 words"),
    ("Summarise the plot of Hamlet in one sentence.", "1 sentence"),
    ("Write twenty-five words about snow.", "25 words"),
    ("Write between 200 and 250 words on sleep.", "200–250 words"),
    ("Write a five-page report on bees.", "5 pages"),
    ("Write a 200-page novel about a detective.", "200 pages"),  # pages up to 100,000 words (issue 29)
    ("List 50 names for a bakery.", "50 items"),
    ("Write a tweet (max 280 characters) about our opening hours.", "≤ 280 characters"),
    ("Schreibe eine Geschichte mit höchstens 200 Wörtern über einen Hund.", "≤ 200 words"),
    ("Fasse die Handlung von Faust in einem Satz zusammen.", "1 sentence"),
    ("Rédige un essai d'au moins 1000 mots sur l'éducation.", "≥ 1000 words"),
    ("Résume ce texte en deux phrases.", "2 sentences"),
    ("Escribe un cuento de 2000 palabras sobre el mar.", "2000 words"),
    ("Explica la gravedad en menos de 50 palabras.", "≤ 50 words"),
    ("Напиши рассказ не более 300 слов о море.", "≤ 300 words"),
    ("Перескажи сюжет одним предложением.", "1 sentence"),
    ("写一篇不少于800字的文章。", "≥ 800 字"),
    ("请在200字以内介绍一下北京。", "≤ 200 字"),
    ("用一句话总结这个故事。", "1 句话"),
])
def test_counts_are_read_in_six_languages(text, label):
    s = read_size(text)
    assert s is not None and s.kind == "count" and s.label == label


@pytest.mark.parametrize("text,label", [
    ("Answer with yes or no: is Canberra the capital of Australia?", "yes/no"),
    ("Who wrote Faust? Answer with the name only.", "name only"),
    ("How many legs does a spider have? Reply with a single number.", "number only"),
    ("Antworte nur mit Ja oder Nein: Ist Berlin die Hauptstadt?", "yes/no"),
    ("Combien de continents ? Réponds uniquement par un nombre.", "number only"),
    ("¿Quién pintó Las Meninas? Dame solo el nombre.", "name only"),
    ("Сколько дней в неделе? Ответь только числом.", "number only"),
    ("请只回答是或否：北京是中国的首都吗？", "yes/no"),
])
def test_closed_answer_forms(text, label):
    s = read_size(text)
    assert s is not None and s.kind == "closed" and s.label == label and s.tokens <= 8


@pytest.mark.parametrize("text,direction", [("Briefly explain TCP.", -1), ("Explain in detail how TCP works.", 1),
                                            ("Erkläre ausführlich, wie TCP funktioniert.", 1), ("简要介绍TCP。", -1)])
def test_vague_cues_only_shift(text, direction):
    s = read_size(text)
    assert s is not None and s.kind == "vague" and s.direction == direction


@pytest.mark.parametrize("text", [
    "What is the capital of France?",
    "Create a dialogue between two characters in a bakery.",       # characters of a story
    "Build me a Vue 3 application landing page with lots of colours.",  # a web page
    "What are all of the 4 letter words that start with q?",       # 4-letter, not 4 words
    "Rate this essay out of 10 points.",                           # a score
    "Why did you stop in the middle of a sentence?",               # "a sentence" without a request
    "Write a Python program that returns the top-5 words of a file.",
    "Every sentence has to end with punctuation, and I want to know how to check it in a regex engine.",
    "Write a 700 page blog entry and comment on the dynamics of it.",  # over 100,000 words: no answer size
    "Sarah reads a 120-page book, and each week she reads half of the rest. How many weeks?",  # material
])
def test_no_size_where_none_is_asked(text):
    s = read_size(text)
    assert s is None or s.kind == "vague"


@pytest.mark.parametrize("text,label", [
    # the size describes the material, the request is elsewhere
    ("The text below has 3000 words. Summarise it in one sentence.\n\n" + PASTE, "1 sentence"),
    ("My 2000-word essay is below. Give it a title of 4-6 words.\n\n" + PASTE, "4–6 words"),
    ("这篇文章有3000字，请用一句话总结。", "1 句话"),
    # a pasted document that itself asks for a size
    ("Summarise this email in two sentences:\n\nHi all,\n\nPlease write 500 words on the quarterly results by "
     "Friday, at least 3 pages.\n\nThanks,\nDana", "2 sentences"),
    ("Give the following text a title of at most 8 words.\n\nAssignment: write a 2000-word report on energy "
     "with 10 references.", "≤ 8 words"),
    ("Please write 500 words on the results by Friday; the board wants a full narrative.\n\n" + PASTE +
     "\n\nWhat is the main point of the text above? Answer in one sentence.", "1 sentence"),
    ("What does this script print? Answer in one sentence.\n\n```\nprint('write 500 words')\n```", "1 sentence"),
    ("Give this text a title of at most 6 words: " + PASTE + " Then write 500 words about it.", "≤ 6 words"),
])
def test_sizes_of_pasted_material_are_not_the_answers(text, label):
    s = read_size(text)
    assert s is not None and s.label == label


def test_a_pasted_size_alone_is_not_read():
    email = ("Translate this email into French:\n\nHi all,\n\nPlease write 500 words on the quarterly results by "
             "Friday.\n\nThanks,\nDana")
    assert read_size(email) is None


def test_system_instructions_are_read_first():
    text = chat("Here is my 2000-word essay about trains, with a 500-word appendix. " + PASTE,
                "You write titles. Reply with a title of 3-5 words and nothing else.")
    assert isinstance(text, ScoredText) and text[text.instructions_at:].startswith("You write titles")
    assert read_size(text).label == "3–5 words"
    # the same words in the user message, with the title request in the system prompt too
    assert read_size(chat(PASTE, "Answer with yes or no.")).label == "yes/no"
    # no user message: the system prompt is scored, all of it instructions
    lone = scored_text({"messages": [{"role": "system", "content": "Reply in one word."}]})
    assert isinstance(lone, ScoredText) and lone.instructions_at == 0 and read_size(lone).label == "1 word"


def test_a_system_prompt_cannot_make_a_request_look_shorter_than_the_size_it_asks_for():
    """The rule (docs/predictor.md, "System instructions and the user's request"): both state an
    explicit size and the user's message asks for its own (a request verb) -> the larger wins."""
    essay = "Write a 2000-word essay on the history of Rome."
    assert read_size(chat(essay, "Always answer with yes or no.")).label == "2000 words"
    assert read_size(chat("What is a mortgage? Explain it in 500 words.",
                          "Keep every answer to no more than 2 sentences.")).label == "500 words"
    assert read_size(chat("Describe a harbour in one sentence.", "Write at least 1000 words.")).label == "≥ 1000 words"
    assert read_size(chat("Schreibe einen Aufsatz mit 2000 Wörtern über Rom.", "Antworte nur mit Ja oder Nein.")
                     ).label == "2000 words"
    pred = load_predictor()
    assert pred.predict(chat(essay, "Always answer with yes or no.")).expected_tokens > 1500  # was 3
    # the instructions still win over a cue, and over a user text that asks for nothing
    assert read_size(chat("Briefly, what is a mortgage?", "Answer with yes or no.")).label == "yes/no"
    assert read_size(chat("Here is my 2000-word essay about trains, with a 500-word appendix. " + PASTE,
                          "You write titles. Reply with a title of 3-5 words and nothing else.")).label == "3–5 words"


@pytest.mark.parametrize("system", ["Classify the tone of the user's text. Reply with one word only.",
                                    "Bestimme den Ton der Nachricht. Antworte nur mit einem Wort.",
                                    "Определи тон сообщения. Ответь одним словом.",
                                    "判断这条消息的语气。只用一个词回答。"])
def test_instructions_over_the_users_message_keep_their_size_whatever_the_message_asks(system):
    s = read_size(chat("Colleagues, please write a report of at least 1000 words on the project.", system))
    assert s is not None and s.tokens <= 3, s


@pytest.mark.parametrize("text,label", [
    ("Erkläre den Zinseszins höchstens in zwei Sätzen.", "≤ 2 sentences"),
    ("Erkläre den Zinseszins in höchstens zwei Sätzen.", "≤ 2 sentences"),
    ("Beschreibe das Meer mindestens in drei Absätzen.", "≥ 3 paragraphs"),
    ("Explique l'inflation au plus en deux phrases.", "≤ 2 sentences"),
    ("Écris un poème de 4 vers sur la mer.", "4 lines"),
    ("Écris un poème de quatre vers sur l'automne.", "4 lines"),
    ("Escribe un poema de 8 versos sobre el mar.", "8 lines"),
])
def test_a_bound_before_its_preposition_and_lines_of_a_poem_are_read(text, label):
    s = read_size(text)
    assert s is not None and s.label == label, s


def test_chinese_list_items_are_read_only_when_asked_for():
    assert read_size("请列出5条建议。").label == "5 条"
    assert read_size("市政府宣布将在明年开通一条新的公交线路，沿途设有八个站点。") is None  # a bus line, not an item


def test_the_label_keeps_no_prompt_text():
    canary = "zebracanary"
    for text in (f"Write 300 words about {canary}.", f"Answer yes or no: is {canary} real?",
                 f"Briefly explain {canary}.", f"{canary} 写一篇500字的文章"):
        s = read_size(text)
        assert s is not None and canary not in s.label and canary not in repr(s)


def test_never_raises_on_odd_text():
    for text in ("", " ", "\n\n\n", "0 words", "a", "1" * 10_000, "words " * 5000, "\ud800 broken surrogate",
                 "<b>" * 3000, "```" * 999, "—" * 5000, "一" * 9000, "99999999999999999999 words",
                 "Write 1,2,3,4 words", ScoredText("x", 5), ScoredText("", 0)):
        read_size(text)


def test_an_explicit_size_dominates_the_model_and_a_cue_only_shifts():
    p = load_predictor()
    one_word = p.predict(chat("What is the overall sentiment of the following text? Answer in one word.\n\n"
                              '"""\n' + PASTE * 3 + '\n"""'))
    assert one_word.expected_tokens <= 6 and one_word.p_short > 0.99
    story = p.predict(chat("Write a 3000-word short story about a lighthouse keeper."))
    assert 1900 <= story.expected_tokens <= 7600 and story.p_long > 0.95  # P(Long) near 1
    plain, brief = "Explain how TCP works.", "Briefly explain how TCP works."
    p.read_sizes = False
    try:
        base = p.predict(brief).expected_tokens
    finally:
        p.read_sizes = True
    assert p.predict(brief).expected_tokens == pytest.approx(base * math.exp(CUE_SHIFT[-1]), rel=1e-6)
    assert read_size(plain) is None
    # the batch paths honour sizes as the single path does; features alone do not
    texts = [chat("Summarise the text below in one sentence.\n\n" + PASTE), chat("What is TCP?")]
    many = p.score_many(texts)
    assert many == pytest.approx([p.predict(t).expected_tokens for t in texts], rel=1e-5)
    assert p.score_features(p.features_many(texts))[0] > 3 * many[0]


def test_held_out_labelled_set_meets_the_issue_targets():
    """Issue 23 must-show, on the part of tests/data/stated_sizes.jsonl held out from all tuning:
    expected tokens within 2x of the stated size for >= 80% of prompts and Kendall tau-b >= 0.7,
    per language."""
    from sjf_lab.stated_eval import evaluate_labelled, load_labelled

    res = evaluate_labelled(load_predictor(), load_labelled(split="test"))
    for lang in ("en", "de", "fr", "es", "ru", "zh"):
        assert res[lang]["within_2x"] >= 0.8, (lang, res[lang])
        assert res[lang]["tau_b"] >= 0.7, (lang, res[lang])
    assert res["all"]["rows"] >= 100


def test_work_bound_guard_counts_stated_sizes_in_true_tokens():
    """A held burst of stated-size short tasks over pasted text and long writing requests is served
    in pure SJF order, and a Long (a 3000-word story) behind an endless stream of one-word tasks
    is dispatched once the served work reaches 8 x its expected tokens, not later than one task more."""
    from sjf_core.policy._pending import REQUEST_OVERHEAD_TOKENS
    from sjf_core.policy._policies import make_policy

    p = load_predictor()
    shorts = [chat(f"Give this text a title of at most 5 words: {PASTE} ({i})") for i in range(5)]
    longs = [chat(f"Write a 2000-word essay about topic {i}.") for i in range(5)]
    preds = [p.predict(t) for t in longs + shorts]  # Longs arrive first
    in_true_tokens(preds, longs + shorts)  # the sizes the guard counts are the stated ones
    policy = make_policy("sjf-tokens")
    pending = policy.new_pending()
    for i, pr in enumerate(preds):
        e = policy.make_entry(i, 0.0, pr)
        e.payload = i
        pending.push(e)
    order = []
    while len(pending):
        order.append(pending.pop(1.0).payload)
    assert set(order[:5]) == set(range(5, 10))  # the stated short tasks first
    texts = [chat("Write a 3000-word short story about a lighthouse keeper."),
             chat("What is the sentiment of this review, in one word: 'It broke.'")]
    story, word = [p.predict(t) for t in texts]
    stated_story = in_true_tokens([story, word], texts)[0]
    pending = policy.new_pending()
    long_e = policy.make_entry(0, 0.0, story)
    start = pending.served_work
    pending.push(long_e)
    bound = 8.0 * (story.expected_tokens + REQUEST_OVERHEAD_TOKENS)
    for seq in range(1, 200_000):
        pending.push(policy.make_entry(seq, 0.0, word))
        served = pending.served_work - start
        if pending.pop(0.0) is long_e:
            break
    assert bound - 1e-6 <= served <= bound + word.expected_tokens + REQUEST_OVERHEAD_TOKENS
    assert served >= 8.0 * stated_story / 2  # the Long waited for 8 x its stated size (within 2x), in tokens


def in_true_tokens(preds, texts) -> list[float]:
    """Each prediction's expected tokens are within 2x of the size its prompt states, in tokens
    (an explicit size dominates the model: issue 23); returns the stated sizes."""
    stated = []
    for pr, t in zip(preds, texts):
        size = read_size(t)
        assert size is not None and size.kind != "vague", t
        assert size.tokens / 2 <= pr.expected_tokens <= 2 * size.tokens, (size.label, pr.expected_tokens, size.tokens)
        stated.append(size.tokens)
    return stated


def test_cli_predict_shows_the_stated_size_and_scores_a_system_prompt(capsys):
    from sjf_lab.cli import main

    assert main(["predict", "Give this text a title of at most 6 words: the harbour met on Tuesday."]) == 0
    assert "stated: ≤ 6 words" in capsys.readouterr().out
    assert main(["predict", "--system", "Reply with a title of 3-5 words.", "Here is a long conversation."]) == 0
    assert "stated: 3–5 words" in capsys.readouterr().out
    assert main(["predict", "--json", "--system", "Answer yes or no.", "Is water wet?"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    assert d["stated"] == "yes/no" and d["stated_kind"] == "closed" and d["expected_tokens"] < 10
    assert main(["predict", "What is the capital of France?"]) == 0
    assert "stated: -" in capsys.readouterr().out
    assert main(["predict", "--system", "Always answer with yes or no.", "Write a 2000-word essay on Rome."]) == 0
    assert "stated: 2000 words" in capsys.readouterr().out


def test_held_burst_scenario_of_the_stated_burst_data():
    """`sjf bench --scenario held-burst` on benchmarks/data/stated_burst.jsonl: every row, cold (a
    fresh proxy), the backend held while the burst is queued; 10 short tasks that state their size
    and 10 long writing requests, which the shipped predictor ranks apart."""
    import argparse
    from pathlib import Path

    from sjf_lab.bench import workload as wl
    from sjf_lab.commands.bench import build_scenarios

    data = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "stated_burst.jsonl"
    rows = wl.load_rows(str(data), max_prompt_chars=6000)
    args = argparse.Namespace(scenario="held-burst", n_short=None, n_long=None, n_medium=0, seed=0,
                              max_tokens=None, hold_s=2.0)
    (sc,) = build_scenarios(args, rows, wl.ServiceModel(1000.0))
    assert sc.name == "held burst cold" and sc.fresh and sc.hold_s == 2.0 and len(sc.jobs) == 20
    p = load_predictor()
    exp = [(j.tokens, p.predict(j.prompt).expected_tokens) for j in sc.jobs]
    short = [e for t, e in exp if t < 200]
    long_ = [e for t, e in exp if t >= 800]
    assert len(short) == len(long_) == 10 and max(short) < min(long_)


def test_spread_knots_are_stored_read_and_validated(tmp_path):
    """The spread calibration (issue 23): add_spread_to_model writes sjf.calibration_spread and the
    card; the predictor reads location and spread from it; malformed knots are a clear error."""
    import json
    import shutil

    from sjf_core.predict._predictor import PredictorError, default_model_path
    from sjf_lab.calibrate import add_spread_to_model, fit_spread

    src = default_model_path()
    dst = tmp_path / "m.onnx"
    shutil.copy(src, dst)
    shutil.copy(src.with_suffix(".json"), tmp_path / "m.json")
    rng = __import__("numpy").random.default_rng(0)
    mu = rng.normal(5.0, 1.0, 4000)
    tokens = __import__("numpy").expm1(mu + rng.normal(0.0, 0.8, 4000))
    knots = fit_spread(mu, tokens)
    assert all(b[1] > a[1] for a, b in zip(knots, knots[1:])) and all(0.3 <= k[2] <= 2.0 for k in knots)
    add_spread_to_model(dst, [[k[0], k[1], 0.5] for k in knots], note="test")
    p = load_predictor(dst)
    assert p.info.spread is not None and json.loads((tmp_path / "m.json").read_text())["calibration_spread_note"] == "test"
    pr = p.predict("What is TCP?")
    assert abs(pr.p_short + pr.p_medium + pr.p_long - 1.0) < 1e-9
    with pytest.raises(PredictorError, match="calibration_spread"):
        add_spread_to_model(dst, [[1.0, 2.0, 0.5], [0.5, 3.0, 0.5]])  # μ not increasing
    with pytest.raises(PredictorError, match="calibration_spread"):
        add_spread_to_model(dst, [[1.0, 2.0, 0.5], [2.0, 3.0, -1.0]])  # σ not positive
