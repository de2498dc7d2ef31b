"""Print the last JSON object that starts at the beginning of a line of a log file.

`scons ... check` and `scons ... report` print their result documents (one line, or indented
JSON) among SCons's own messages; ci/build-recipe.sh keeps the last one of each as an
artifact.  Usage: python3 last_json.py LOG > DOC.json   (exit 1 when there is none)
"""
import json
import sys


def last_json(text):
    dec, last, pos = json.JSONDecoder(), None, 0
    while True:
        pos = text.find("{", pos)
        if pos < 0:
            return last
        if pos == 0 or text[pos - 1] == "\n":
            try:
                doc, end = dec.raw_decode(text, pos)
            except ValueError:
                pass
            else:
                if isinstance(doc, dict):
                    last = doc
                pos = end
                continue
        pos += 1


def main(argv):
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        doc = last_json(f.read())
    if doc is None:
        print(f"last_json: no JSON document in {argv[1]}", file=sys.stderr)
        return 1
    json.dump(doc, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
