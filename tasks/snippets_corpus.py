"""Human-rated sentiment snippets (Hutto & Gilbert, ICWSM 2014), read from the vaderSentiment sdist.

The MIT-licensed source distribution ``vaderSentiment-3.3.2.tar.gz`` on PyPI (the asset manifest's
``packages: vaderSentiment``: its URL and SHA-256) carries ``additional_resources/hutto_ICWSM_2014.tar.gz``:
10,605 movie-review sentences from rottentomatoes.com (Pang & Lee's review set), each rated from -4 to
+4 by 15 to 29 people, median 18 (``movieReviewSnippets_GroundTruth.txt``: id, mean, text;
``movieReviewSnippets_anonDataRatings.txt``: id, mean, standard deviation, the raw ratings), and the
same for Amazon, New York Times and tweet-like snippets. This module reads the movie snippets
without extracting anything to disk and without running any code of the package, and writes them as
the ``movie_snippets`` task's Parquet files:

- one row per distinct text (2 repeated texts keep their first id: 10,603 rows); columns ``id``,
  ``text`` (whitespace collapsed), ``rating`` (the mean, in [-4, 4]), ``rating_std``, ``ratings`` (the
  raw ratings), ``positive_share`` (the share of raters who rated it above 0, a 0 counting half: what
  the reward classifier learns, P(a rater reads it as positive)), ``opening_words`` (the prompt rule
  below; 0: the snippet gives no prompt) and ``half`` (``a`` / ``b`` for train rows: the reward
  classifier learns from half a, the judge from half b; empty elsewhere);
- splits fixed by each id's SHA-256 (``sha256("movie_snippets:" + id)``, rows in that order): the first
  1,060 are ``test``, the next 1,060 ``validation``, the other 8,483 ``train``, alternating a / b.

The prompt rule (:func:`opening_words`): the snippet's opening words up to, not including, the first
word that carries sentiment (a word of VADER's lexicon, the ``vader_lexicon.txt`` of the same sdist),
a negation or a contrast word, at most 8 words and leaving at least 3; an opening of fewer than 3
words gives no prompt (so a prompt names the film, the people or the
scene, not the verdict: "Director Roger Kumble offers just enough" -> " sweet and traditional ...").
6,228 of the 10,603 snippets give one (train 5,011, validation 602, test 615).

    python -m hfrl.tasks.movie_snippets prepare        # download, check, parse, split, train the classifiers
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

CORPUS_MEMBER = "additional_resources/hutto_ICWSM_2014.tar.gz"
LEXICON_MEMBER = "vaderSentiment/vader_lexicon.txt"
MOVIES = "movieReviewSnippets"
SPLIT_KEY = "movie_snippets:"
TEST_ROWS = VALIDATION_ROWS = 1060
MIN_OPENING, MAX_OPENING, MIN_REST = 3, 8, 3
# Words that turn or deny what follows (the lexicon rates neither): the opening stops before them.
NEGATIONS = frozenset({
    "not", "no", "never", "none", "nothing", "nobody", "nowhere", "neither", "nor", "cannot", "cant", "without",
    "hardly", "barely", "scarcely", "seldom", "rarely", "aint",
})  # fmt: skip
CONTRASTS = frozenset({"but", "yet", "although", "though", "however", "despite", "while", "whereas"})
PUNCTUATION = ".,;:!?\"'()[]{}-*…“”‘’"


# ---- the sdist -----------------------------------------------------------------------------------
def sdist_entry() -> dict[str, Any]:
    """The manifest's entry of the vaderSentiment sdist (url, version, file, sha256)."""
    from hfrl.utils.assets import package_entry

    return package_entry("vaderSentiment")


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checked_sdist(path: str | os.PathLike[str], sha256: str) -> Path:
    """``path`` once its SHA-256 is ``sha256``; a ValueError that says what to do otherwise."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no sdist at {path}: pass the vaderSentiment-3.3.2.tar.gz file (or omit --sdist)")
    found = sha256_of(path)
    if found != sha256:
        raise ValueError(
            f"{path.name}: SHA-256 {found[:12]}... is not the manifest's {sha256[:12]}... (hfrl/assets.yaml, "
            "packages: vaderSentiment): a different or damaged file; delete it and download it again"
        )
    return path


def download_sdist(folder: str | os.PathLike[str], entry: dict[str, Any] | None = None) -> Path:
    """The sdist downloaded from the manifest's PyPI URL into ``folder`` and checked against its SHA-256
    (urllib: nothing of the package runs; ``pip download`` would build its metadata with its setup.py)."""
    import urllib.request

    entry = entry or sdist_entry()
    target: Path = Path(folder) / entry["file"]
    if target.is_file() and sha256_of(target) == entry["sha256"]:
        return target
    with tempfile.NamedTemporaryFile(dir=str(folder), delete=False, suffix=".part") as tmp:
        try:
            with urllib.request.urlopen(entry["url"], timeout=120) as response:  # noqa: S310 - a pinned https URL
                for block in iter(lambda: response.read(1 << 20), b""):
                    tmp.write(block)
        except OSError as err:
            os.unlink(tmp.name)
            raise OSError(
                f"cannot download {entry['url']} ({err}); where PyPI is reachable, `pip download --no-binary "
                f":all: --no-deps vaderSentiment=={entry['version']}`, then pass the file with --sdist"
            ) from err
    os.replace(tmp.name, target)
    return checked_sdist(target, entry["sha256"])


def _member(archive: tarfile.TarFile, suffix: str) -> bytes:
    """The bytes of the one regular file whose name ends with ``/suffix`` (read, never extracted)."""
    found = [m for m in archive.getmembers() if m.isfile() and (m.name == suffix or m.name.endswith("/" + suffix))]
    if len(found) != 1:
        raise ValueError(f"the archive has {len(found)} files named */{suffix}; expected one")
    handle = archive.extractfile(found[0])
    assert handle is not None  # a regular file
    return handle.read()


def read_sdist(path: str | os.PathLike[str]) -> tuple[dict[str, bytes], dict[str, float]]:
    """``({file name: bytes} of the ICWSM 2014 corpus, VADER's lexicon {word: valence})`` from the sdist."""
    with tarfile.open(path, "r:gz") as sdist:
        corpus = _member(sdist, CORPUS_MEMBER)
        lexicon = read_lexicon(_member(sdist, LEXICON_MEMBER).decode("utf-8"))
    files = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(corpus)), mode="r:") as inner:
        for member in inner.getmembers():
            if member.isfile() and member.name.endswith(".txt"):
                handle = inner.extractfile(member)
                assert handle is not None
                files[Path(member.name).name] = handle.read()
    return files, lexicon


def read_lexicon(text: str) -> dict[str, float]:
    """VADER's lexicon file (token, mean valence, ... per tab-separated line) -> {token: valence}."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip():
            out[parts[0].strip().lower()] = float(parts[1])
    return out


# ---- parsing -------------------------------------------------------------------------------------
def parse_snippets(ground_truth: str, raw_ratings: str) -> list[dict[str, Any]]:
    """The rows of one corpus: ``*_GroundTruth.txt`` (id, mean, text) joined with ``*_anonDataRatings.txt``
    (id, mean, std, ``[r1, r2, ...]``) on the id.

    >>> rows = parse_snippets("7\\t1.5\\tA  fine film.\\r\\n", "7\\t1.5\\t0.5\\t[1, 2, 0, 3]\\n")
    >>> rows[0]["text"], rows[0]["rating"], rows[0]["positive_share"]
    ('A fine film.', 1.5, 0.875)
    """
    raw = {}
    for number, line in enumerate(raw_ratings.splitlines(), 1):
        if line.strip():
            parts = line.split("\t")
            if len(parts) != 4:
                raise ValueError(f"ratings line {number}: expected id, mean, std, [ratings]; got {line[:60]!r}")
            ratings = ast.literal_eval(parts[3].strip())  # a list of ints: literal_eval evaluates no code
            if not isinstance(ratings, list) or not ratings or not all(isinstance(r, int) for r in ratings):
                raise ValueError(f"ratings line {number}: the ratings are not a list of integers: {parts[3][:60]!r}")
            raw[parts[0].strip()] = (float(parts[2]), ratings)
    rows = []
    for number, line in enumerate(ground_truth.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t", 2)
        if len(parts) != 3:
            raise ValueError(f"ground-truth line {number}: expected id, mean, text; got {line[:60]!r}")
        key = parts[0].strip()
        if key not in raw:
            raise ValueError(f"ground-truth line {number}: id {key!r} has no raw ratings")
        std, ratings = raw[key]
        positive = sum(r > 0 for r in ratings) + 0.5 * sum(r == 0 for r in ratings)
        rows.append({
            "id": key, "text": " ".join(parts[2].split()), "rating": float(parts[1]), "rating_std": std,
            "ratings": ratings, "positive_share": positive / len(ratings),
        })  # fmt: skip
    return rows


def _word(token: str) -> str:
    return token.strip(PUNCTUATION).lower()


def opening_words(text: str, lexicon: dict[str, float]) -> int:
    """How many opening words of ``text`` make its prompt (0: none; the rule in the module docstring).

    >>> lexicon = {"good": 1.9, "bad": -2.5}
    >>> opening_words("The third act of this thriller is good and fast", lexicon)
    7
    >>> opening_words("A bad film", lexicon), opening_words("It is not a film I would see again", lexicon)
    (0, 0)
    """
    words = text.split()
    count = 0
    for token in words[:MAX_OPENING]:
        word = _word(token)
        if word in lexicon or token.lower() in lexicon or word in NEGATIONS or word in CONTRASTS:
            break
        if word.endswith("n't"):
            break
        count += 1
    count = min(count, len(words) - MIN_REST)
    return count if count >= MIN_OPENING else 0


def split_key(row_id: str) -> str:
    return hashlib.sha256(f"{SPLIT_KEY}{row_id}".encode()).hexdigest()


def split_rows(rows: list[dict[str, Any]], lexicon: dict[str, float]) -> dict[str, list[dict[str, Any]]]:
    """Distinct texts (first id kept) in SHA-256 order of their ids: test, validation, then train
    (alternating halves a / b), each row with its ``opening_words`` and ``half``."""
    seen: set[str] = set()
    distinct = []
    for row in rows:
        if row["text"] and row["text"] not in seen:
            seen.add(row["text"])
            distinct.append(row)
    ordered = sorted(distinct, key=lambda r: split_key(r["id"]))
    test_end = min(TEST_ROWS, len(ordered) // 10 or 1)  # a small corpus (a test's) keeps 10% each
    val_end = test_end + min(VALIDATION_ROWS, len(ordered) // 10 or 1)
    out: dict[str, list[dict[str, Any]]] = {"train": [], "validation": [], "test": []}
    for i, row in enumerate(ordered):
        split = "test" if i < test_end else "validation" if i < val_end else "train"
        half = ("a" if (i - val_end) % 2 == 0 else "b") if split == "train" else ""
        out[split].append({**row, "opening_words": opening_words(row["text"], lexicon), "half": half})
    return out


def movie_splits(sdist: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """The movie snippets' splits from a (checked) sdist."""
    files, lexicon = read_sdist(sdist)
    names = [f"{MOVIES}_GroundTruth.txt", f"{MOVIES}_anonDataRatings.txt"]
    missing = [n for n in names if n not in files]
    if missing:
        raise ValueError(f"the corpus archive has no {missing[0]}")
    texts = [files[name].decode("utf-8-sig") for name in names]  # UTF-8 (the ratings file with a BOM)
    return split_rows(parse_snippets(*texts), lexicon)


def write_splits(splits: dict[str, list[dict[str, Any]]], folder: str | os.PathLike[str]) -> dict[str, Path]:
    """``{folder}/{split}.parquet`` for each split (written beside, then renamed into place)."""
    import pyarrow.parquet as pq
    from datasets import Dataset, Features, Sequence, Value

    features = Features({
        "id": Value("string"), "text": Value("string"), "rating": Value("float64"), "rating_std": Value("float64"),
        "ratings": Sequence(Value("int64")), "positive_share": Value("float64"), "opening_words": Value("int64"),
        "half": Value("string"),
    })  # fmt: skip
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, rows in splits.items():
        path = folder / f"{split}.parquet"
        tmp = folder / f".{split}.parquet.tmp{os.getpid()}"
        pq.write_table(Dataset.from_list(rows, features=features).data.table, str(tmp))
        os.replace(tmp, path)
        paths[split] = path
    return paths


__all__ = [
    "checked_sdist",
    "download_sdist",
    "movie_splits",
    "opening_words",
    "parse_snippets",
    "read_sdist",
    "sdist_entry",
    "split_rows",
    "write_splits",
]
