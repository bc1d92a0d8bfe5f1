"""Documents in every converted format, made at test time with the real tools (fpdf2,
python-docx, python-pptx; zipfile for EPUB and ODT; HTML by hand), each holding known
sentences on known pages, slides, sections or chapters.

:data:`FACTS` lists them: (file, sentence, where) -- what a test greps for in the text view
and expects a search to cite. The bad files (encrypted, scanned, corrupt, zip bomb) are
made by :func:`make_bad`.
"""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

# (file, a sentence in it, where it is: "page N", "slide N", "chapter N", "section TITLE").
FACTS: list[tuple[str, str, str]] = [
    ("report.pdf", "The cooling tower pump was replaced in March after the bearing failed.",
     "page 1"),
    ("report.pdf", "The north warehouse stores the spare turbine blades.", "page 2"),
    ("report.pdf", "Visitors must sign the logbook at the east gate.", "page 2"),
    ("report.pdf", "Borealis Seals", "page 3"),
    ("report.pdf", "The fire drill is held on the first Monday of every quarter.", "page 4"),
    ("handbook.docx", "New starters receive their laptop from the service desk on day one.",
     "section Onboarding"),
    ("handbook.docx", "Expense claims above five hundred euros need a director's approval.",
     "section Expenses"),
    ("handbook.docx", "Remote work is allowed up to three days a week.", "section Remote work"),
    ("roadmap.pptx", "The billing service moves to the new cluster in April.", "slide 1"),
    ("roadmap.pptx", "Mobile checkout ships behind a feature flag.", "slide 2"),
    ("roadmap.pptx", "Ask finance about the budget for the data warehouse.", "slide 2"),
    ("roadmap.pptx", "Search latency must stay under two hundred milliseconds.", "slide 3"),
    ("guide.html", "Backups run every night at two and are kept for thirty days.",
     "section Backups"),
    ("guide.html", "Restoring a backup needs a ticket approved by the on-call engineer.",
     "section Restores"),
    ("novel.epub", "The lighthouse keeper counted forty ships before the storm.", "chapter 1"),
    ("novel.epub", "Mara found the brass key under the third floorboard.", "chapter 2"),
    ("novel.epub", "The ferry to the island left only when the tide was high.", "chapter 3"),
    ("minutes.odt", "The committee voted to repaint the library in green.", "section Decisions"),
    ("minutes.odt", "The next meeting is moved to the community hall.", "section Next meeting"),
]  # fmt: skip
# Text in the HTML page that is not content: a test checks none of it reaches the view.
HTML_FURNITURE = ("secretTrackingToken", "color: hotpink", "Site navigation home link",
                  "Copyright footer line")  # fmt: skip


def _facts(name: str, where: str) -> list[str]:
    return [s for f, s, w in FACTS if f == name and w == where]


def make_pdf(path: Path) -> None:
    """Four pages: prose; two columns; a table; prose again."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Plant operations report")
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Operations summary.\n\n" + " ".join(_facts("report.pdf", "page 1")))
    pdf.add_page()  # two columns, each its own text block
    left, right = _facts("report.pdf", "page 2")
    y = pdf.get_y()
    pdf.multi_cell(90, 6, "Storage. " + left + " Each blade is tagged.")
    pdf.set_xy(110, y)
    pdf.multi_cell(90, 6, "Access. " + right + " The guard keeps the book.")
    pdf.add_page()
    pdf.multi_cell(0, 6, "Suppliers of spare parts:")
    with pdf.table() as table:
        for row in (("Part", "Supplier", "Price"), ("Valve", "Acme Fluidics", "120"),
                    ("Gasket", "Borealis Seals", "4")):  # fmt: skip
            cells = table.row()
            for cell in row:
                cells.cell(cell)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Safety.\n\n" + " ".join(_facts("report.pdf", "page 4")))
    pdf.output(str(path))


def make_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "Staff handbook"
    document.add_heading("Staff handbook", level=0)
    for title in ("Onboarding", "Expenses", "Remote work"):
        document.add_heading(title, level=1)
        for sentence in _facts("handbook.docx", f"section {title}"):
            document.add_paragraph(sentence)
        document.add_paragraph("Ask your manager if anything is unclear.", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Desk", "Floor"
    table.cell(1, 0).text, table.cell(1, 1).text = "Service desk", "Ground floor"
    document.save(str(path))


def make_pptx(path: Path) -> None:
    import pptx

    deck = pptx.Presentation()
    layout = deck.slide_layouts[1]  # title and content
    product, notes = _facts("roadmap.pptx", "slide 2")
    bodies = {
        1: ("Platform", _facts("roadmap.pptx", "slide 1"), ""),
        2: ("Product", [product], notes),
        3: ("Targets", _facts("roadmap.pptx", "slide 3"), ""),
    }
    for _number, (title, lines, notes) in sorted(bodies.items()):
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = "\n".join(lines)
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    deck.save(str(path))


def html_page() -> str:
    backups = _facts("guide.html", "section Backups")[0]
    restores = _facts("guide.html", "section Restores")[0]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Operations guide</title>
<style>body {{ color: hotpink }}</style>
<script>var secretTrackingToken = "abc123"; document.write("x");</script></head>
<body>
<nav><a href="/">Site navigation home link</a> <a href="/docs">Docs</a></nav>
<header><p>Operations portal</p></header>
<main>
<h1>Operations guide</h1>
<p>This guide covers the storage cluster.</p>
<h2>Backups</h2><p>{backups}</p>
<ul><li>Nightly full copy</li><li>Hourly logs</li></ul>
<h2>Restores</h2><p>{restores}</p>
</main>
<footer>Copyright footer line</footer>
</body></html>
"""


def make_html(path: Path) -> None:
    path.write_text(html_page(), encoding="utf-8")


def make_epub(path: Path) -> None:
    """An EPUB 3 of three chapters, built with zipfile (mimetype first, stored)."""
    chapters = [
        ("The Lighthouse", _facts("novel.epub", "chapter 1")[0]),
        ("The Key", _facts("novel.epub", "chapter 2")[0]),
        ("The Ferry", _facts("novel.epub", "chapter 3")[0]),
    ]
    manifest = "".join(
        f'<item id="c{i}" href="text/ch{i}.xhtml" media-type="application/xhtml+xml"/>'
        for i in range(1, 4)
    )
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(1, 4))
    opf = f"""<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Tides</dc:title>
<dc:identifier id="id">urn:uuid:1</dc:identifier><dc:language>en</dc:language></metadata>
<manifest>{manifest}</manifest><spine>{spine}</spine></package>"""
    container = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
</rootfiles></container>"""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", container)
        z.writestr("OEBPS/content.opf", opf)
        for i, (title, sentence) in enumerate(chapters, 1):
            z.writestr(
                f"OEBPS/text/ch{i}.xhtml",
                f'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
                f"<head><title>{title}</title></head><body><h1>{title}</h1>"
                f"<p>It was a grey morning.</p><p>{sentence}</p></body></html>",
            )


def make_odt(path: Path) -> None:
    decisions = _facts("minutes.odt", "section Decisions")[0]
    nxt = _facts("minutes.odt", "section Next meeting")[0]
    content = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">
<office:body><office:text>
<text:h text:outline-level="1">Minutes</text:h>
<text:p>Present: the whole committee.</text:p>
<text:h text:outline-level="2">Decisions</text:h><text:p>{decisions}</text:p>
<text:h text:outline-level="2">Next meeting</text:h><text:p>{nxt}</text:p>
</office:text></office:body></office:document-content>"""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content)


MAKERS = {
    "report.pdf": make_pdf,
    "handbook.docx": make_docx,
    "roadmap.pptx": make_pptx,
    "guide.html": make_html,
    "novel.epub": make_epub,
    "minutes.odt": make_odt,
}


def make_all(folder: Path) -> list[Path]:
    """Every fixture document in ``folder``; the paths made."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for name, maker in MAKERS.items():
        maker(folder / name)
        made.append(folder / name)
    return made


# The bad files, by name, and the reason `semfs ingest` must give for each (a substring).
BAD_REASONS = {
    "locked.pdf": "encrypted PDF, not ingested",
    "scan.pdf": "no text layer (scanned?)",
    "broken.pdf": "corrupt PDF",
    "broken.docx": "corrupt Word document",
    "bomb.docx": "zip bomb",
    "crowded.epub": "zip bomb",
    "laughs.odt": "limit on input amplification factor",  # expat refuses entity expansion
}


def make_bad(folder: Path) -> None:
    """The files of :data:`BAD_REASONS` in ``folder``."""
    from fpdf import FPDF
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    pdf = FPDF()
    pdf.set_encryption(owner_password="owner", user_password="secret")
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Salaries of the board.")
    pdf.output(str(folder / "locked.pdf"))
    scan = FPDF()
    scan.add_page()
    image = io.BytesIO()
    Image.new("RGB", (200, 100), "white").save(image, "PNG")
    scan.image(image, x=10, y=10, w=100)
    scan.output(str(folder / "scan.pdf"))
    good = io.BytesIO()
    make_pdf_bytes = FPDF()
    make_pdf_bytes.add_page()
    make_pdf_bytes.set_font("Helvetica", size=11)
    make_pdf_bytes.multi_cell(0, 6, "Truncated in transit.")
    make_pdf_bytes.output(good)
    (folder / "broken.pdf").write_bytes(good.getvalue()[:200])
    (folder / "broken.docx").write_bytes(b"PK\x03\x04 this is not really a zip")
    (folder / "bomb.docx").write_bytes(_claims_huge(b"word/document.xml", b"<w:document/>"))
    with zipfile.ZipFile(folder / "crowded.epub", "w") as z:
        for i in range(10_001):
            z.writestr(f"x/{i}", b"")
    # "Billion laughs": nine levels of entities, each ten of the one below (10^9 "lol"s).
    levels = "".join(
        f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' if i else '<!ENTITY l0 "lol">' for i in range(10)
    )
    laughs = (
        f'<?xml version="1.0"?><!DOCTYPE d [{levels}]><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
        "<text:p>&l9;</text:p></office:text></office:body></office:document-content>"
    )
    with zipfile.ZipFile(folder / "laughs.odt", "w") as z:
        z.writestr("content.xml", laughs)


def _claims_huge(name: bytes, data: bytes) -> bytes:
    """A zip whose one member declares 4 GB uncompressed: what a zip bomb's directory says,
    without making the test inflate gigabytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name.decode(), data)
    raw = bytearray(buf.getvalue())
    at = raw.rfind(b"PK\x01\x02")  # the central directory entry: uncompressed size at +24
    raw[at + 24 : at + 28] = struct.pack("<I", 0xFFFFFFF0)
    return bytes(raw)


def lying_zip(
    name: str, inflated: int, declared: int = 1000, extra: dict[str, bytes] | None = None
) -> bytes:
    """A zip whose member ``name`` holds ``inflated`` zero bytes but declares ``declared`` in
    both its headers (issue 29: zipfile inflates it all before cutting to the declared size)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for other, data in (extra or {}).items():
            z.writestr(other, data)
        z.writestr(name, bytes(inflated))
    raw = bytearray(buf.getvalue())
    local = zipfile.ZipFile(io.BytesIO(bytes(raw))).getinfo(name).header_offset
    raw[local + 22 : local + 26] = struct.pack("<I", declared)  # local: uncompressed at +22
    central = raw.rfind(b"PK\x01\x02")  # the last central entry is ``name``'s: +24
    raw[central + 24 : central + 28] = struct.pack("<I", declared)
    return bytes(raw)


def docx_with(xml_body: str, doctype: str = "") -> bytes:
    """A Word document whose body paragraph text is replaced by ``xml_body`` (raw XML), with
    ``doctype`` before the root element."""
    import docx

    document = docx.Document()
    document.add_paragraph("PLACEHOLDER")
    made = io.BytesIO()
    document.save(made)
    source = zipfile.ZipFile(made)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "word/document.xml":
                text = data.decode().replace("PLACEHOLDER", xml_body)
                text = text.replace("<w:document", doctype + "<w:document", 1)
                data = text.encode()
            z.writestr(info, data)
    return out.getvalue()
