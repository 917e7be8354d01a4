"""LSP columns <-> Python string indices, in the negotiated position encoding (UTF-16 code units by default).

Python strings index code points, which is UTF-32. A UTF-16 column counts a character outside the BMP
(an emoji) as two units, a UTF-8 column counts bytes. A column that lands inside one character (half a
surrogate pair, the middle of a UTF-8 sequence) is invalid: strict conversion refuses it.
"""

from __future__ import annotations

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"
ENCODINGS = (UTF8, UTF16, UTF32)


class PositionError(ValueError):
    """A position that does not name a place in the document."""


def _check(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown position encoding {encoding!r}")


def column_to_index(line: str, character: int, encoding: str = UTF16, strict: bool = True) -> int:
    """Code-point index of an LSP column in `line` (the line's text without its end of line).

    A column past the end of the line means the end of the line (LSP rule). Inside a character: an error
    when strict, else the start of that character.
    """
    _check(encoding)
    if character < 0:
        raise PositionError(f"negative column {character}")
    if encoding == UTF32 or line.isascii():
        return min(character, len(line))
    if encoding == UTF16:
        data, width, codec = line.encode("utf-16-le", "surrogatepass"), 2, "utf-16-le"
    else:
        data, width, codec = line.encode("utf-8", "surrogatepass"), 1, "utf-8"
    cut = character * width
    if cut >= len(data):
        return len(line)
    inside = _splits_utf16(data, cut) if encoding == UTF16 else (data[cut] & 0xC0) == 0x80
    if inside:
        if strict:
            raise PositionError(f"column {character} ({encoding}) falls inside a character")
        while cut > 0 and (_splits_utf16(data, cut) if encoding == UTF16 else (data[cut] & 0xC0) == 0x80):
            cut -= width
    return len(data[:cut].decode(codec, "surrogatepass"))


def _splits_utf16(data: bytes, cut: int) -> bool:
    """True when byte offset `cut` sits between the two halves of a surrogate pair."""
    if cut < 2:
        return False
    before = int.from_bytes(data[cut - 2 : cut], "little")
    after = int.from_bytes(data[cut : cut + 2], "little")
    return 0xD800 <= before <= 0xDBFF and 0xDC00 <= after <= 0xDFFF


def index_to_column(line: str, index: int, encoding: str = UTF16) -> int:
    """LSP column of code-point index `index` in `line`."""
    _check(encoding)
    head = line[:index]
    if encoding == UTF32 or head.isascii():
        return len(head)
    if encoding == UTF16:
        return len(head.encode("utf-16-le", "surrogatepass")) // 2
    return len(head.encode("utf-8", "surrogatepass"))
