"""PowerPoint (.pptx): each slide's text, then its speaker notes (python-pptx, MIT).

The view has one ``## Slide N: Title`` heading per slide and a ``### Notes`` heading before
the notes, so a search hit names its slide.
"""

from __future__ import annotations

import io

from semfs.ingest.formats.base import (
    Extracted,
    Unsupported,
    ViewBuilder,
    clean_lines,
    first_line,
    literal,
    open_zip,
)


def extract(path: str, data: bytes) -> Extracted | Unsupported:
    archive = open_zip(data, "PowerPoint file")
    if isinstance(archive, Unsupported):
        return archive
    archive.close()
    import pptx

    try:
        deck = pptx.Presentation(io.BytesIO(data))
        return _view(deck)
    except Exception as exc:  # python-pptx and lxml raise many types: a reason, never a crash
        return Unsupported(f"corrupt PowerPoint file ({first_line(exc)})")


def _view(deck: object) -> Extracted | Unsupported:
    view = ViewBuilder("slide")
    found = False
    for number, slide in enumerate(deck.slides, 1):  # type: ignore[attr-defined]
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
        view.mark(str(number), f"## Slide {number}: {title}" if title else f"## Slide {number}")
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            text = _shape_text(shape)
            if text:
                view.add(literal(text))
                view.add("")
                found = True
        found = found or bool(title)
        if slide.has_notes_slide:
            notes = clean_lines(slide.notes_slide.notes_text_frame.text or "")
            if notes:
                view.add("### Notes")
                view.add("")
                view.add(literal(notes))
                found = True
    if not found:
        return Unsupported("PowerPoint file with no text, not ingested")
    return view.build()


def _shape_text(shape: object) -> str:
    if getattr(shape, "has_table", False):
        rows = [
            " | ".join(" ".join(c.text.split()) for c in row.cells)
            for row in shape.table.rows  # type: ignore[attr-defined]
        ]
        return "\n".join(f"| {r} |" for r in rows if r.strip(" |"))
    if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):
        return "\n".join(t for t in (_shape_text(s) for s in shape.shapes) if t)  # a group
    if not getattr(shape, "has_text_frame", False):
        return ""
    lines = []
    for para in shape.text_frame.paragraphs:  # type: ignore[attr-defined]
        text = " ".join(para.text.split())
        if text:
            lines.append(("  " * para.level + "- " + text) if para.level else text)
    return "\n".join(lines)
