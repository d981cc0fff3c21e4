"""fio's log as a pod prints it (pure): its JSON documents and the words around them (fio's own errors and
warnings), for every step that runs fio (the data path, the class change)."""

from __future__ import annotations

import json

from csibench.api.text import collapse_lines

MAX_MESSAGE = 600


def split_log(log: str) -> tuple[list[object], str]:
    """The JSON documents in a log, in order, and the text around them (fio's own error and warning lines)."""
    decoder = json.JSONDecoder()
    documents: list[object] = []
    text: list[str] = []
    position = 0
    while True:
        if log.startswith("{", position):
            start = position
        else:
            found = log.find("\n{", position)  # a document starts at the beginning of a line
            if found < 0:
                text.append(log[position:])
                break
            start = found + 1
        text.append(log[position:start])
        try:
            document, length = decoder.raw_decode(log[start:])
        except ValueError:
            text.append(log[start:])
            break
        documents.append(document)
        position = start + length
    return documents, "".join(text)


def messages_of(log: str) -> str:
    """fio's own lines outside its JSON documents (errors and warnings): repeated shapes counted, the last line
    first, within MAX_MESSAGE."""
    _, text = split_log(log)
    return collapse_lines(text.splitlines(), MAX_MESSAGE)
