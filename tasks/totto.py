"""GRUE task ``totto``: one sentence about the highlighted cells of a Wikipedia table (RL4LMs' ToTTo).

Data: ``GEM/totto`` in the Hub's Parquet conversion (``totto/{split}/*.parquet``, pinned commit).
Prompt: RL4LMs' ``subtable`` representation, the ToTTo baseline's linearisation of the highlighted
cells with their heuristic row and column headers (google-research/language,
``totto/baseline_preprocessing``), first without and then with the page and section titles, the two
strings joined as RL4LMs joins them. References: the annotators' final sentences (GEM's
``references`` when given, else ``sentence_annotations``; the hidden test split has none).
``table`` holds ``[attribute, value]`` pairs (page title, section title, each highlighted cell with
its headers) for PARENT. Reward: METEOR.

    hfrl train --task totto --alg ppo
"""

from __future__ import annotations

from typing import Any

from hfrl.tasks.data import parquet_builder


def _with_offsets(table: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each cell with ``start`` / ``end``: its column range once multi-column cells are counted."""
    out = []
    for row in table:
        col, cells = 0, []
        for cell in row:
            span = int(cell.get("column_span") or 1)
            cells.append({**cell, "start": col, "end": col + span})
            col += span
        out.append(cells)
    return out


def highlighted_subtable(table: list[list[dict[str, Any]]], cells: list[list[int]]) -> list[dict[str, Any]]:
    """The highlighted cells with their heuristic headers (ToTTo baseline ``get_highlighted_subtable``):
    row headers are header cells to the left in the same row, column headers are header cells in rows
    above that overlap the cell's columns."""
    adjusted = _with_offsets(table)
    out = []
    for row_index, col_index in cells:
        cell = adjusted[row_index][col_index]
        row_headers = [c for c in adjusted[row_index][:col_index] if c["is_header"]]
        col_headers = [
            c
            for row in adjusted[:row_index]
            for c in row
            if c["start"] < cell["end"] and c["end"] > cell["start"] and c["is_header"]
        ]
        out.append({"cell": cell, "row_headers": row_headers, "col_headers": col_headers})
    return out


def linearize_subtable(subtable: list[dict[str, Any]], page_title: str | None, section_title: str | None) -> str:
    """ToTTo baseline ``linearize_subtable``.

    >>> cell = {"value": "1995", "is_header": False, "column_span": 1, "row_span": 1}
    >>> linearize_subtable([{"cell": cell, "row_headers": [], "col_headers": []}], "Page", None)
    '<page_title> Page </page_title> <table> <cell> 1995 </cell> </table>'
    """
    text = ""
    if page_title:
        text += "<page_title> " + page_title + " </page_title> "
    if section_title:
        text += "<section_title> " + section_title + " </section_title> "
    text += "<table> "
    for item in subtable:
        text += "<cell> " + item["cell"]["value"] + " "
        text += "".join("<col_header> " + h["value"] + " </col_header> " for h in item["col_headers"])
        text += "".join("<row_header> " + h["value"] + " </row_header> " for h in item["row_headers"])
        text += "</cell> "
    return text + "</table>"


def _final_sentences(annotations: Any) -> list[str]:
    """Final sentences from ``sentence_annotations`` as a list of records or as a record of lists."""
    if not annotations:
        return []
    if isinstance(annotations, dict):
        return [s for s in annotations.get("final_sentence") or [] if s]
    return [a["final_sentence"] for a in annotations if a.get("final_sentence")]


def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """ToTTo rows -> linearised highlighted subtables, final sentences and PARENT tables."""
    prompts, references, tables = [], [], []
    for i, table in enumerate(batch["table"]):
        page, section = batch["table_page_title"][i], batch["table_section_title"][i]
        subtable = highlighted_subtable(table, batch["highlighted_cells"][i])
        # RL4LMs: the subtable without titles, then with them, concatenated
        prompts.append(linearize_subtable(subtable, None, None) + linearize_subtable(subtable, page, section))
        given = [r for r in (batch["references"][i] if "references" in batch else None) or [] if r]
        references.append(given or _final_sentences(batch["sentence_annotations"][i]))
        records = [["page_title", page], ["section_title", section]]
        for item in subtable:
            headers = " ".join(h["value"] for h in item["col_headers"] + item["row_headers"])
            records.append([headers or "cell", item["cell"]["value"]])
        tables.append([r for r in records if r[1]])
    return {"prompt": prompts, "references": references, "table": tables}


build = parquet_builder(__file__, preprocess, "ToTTo")
