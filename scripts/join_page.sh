#!/bin/sh
# join_page.sh SHELL: the page a folder of parts makes, on stdout, for the build to turn
# into a C string. SHELL (the viewer's page.html, the ONNX folder's page) is copied line by
# line, except that a line holding only `<!-- part: NAME -->` becomes the whole of the file
# NAME, a path from the shell's folder (the ONNX page takes the viewer's map panel so).
# A part that cannot be read is an error, named, and nothing is written.
set -eu
dir=$(dirname "$1")
awk -v dir="$dir" '
  /^<!-- part: [A-Za-z0-9_.\/-]+ -->$/ {
    part = dir "/" $3
    while ((got = (getline line < part)) > 0) out = out line "\n"
    if (got < 0) { printf "join_page.sh: %s: cannot read the part %s\n", FILENAME, part > "/dev/stderr"; failed = 1; exit 1 }
    close(part)
    next
  }
  { out = out $0 "\n" }
  END { if (!failed) printf "%s", out }
' "$1"
