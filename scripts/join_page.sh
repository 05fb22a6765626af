#!/bin/sh
# join_page.sh SHELL: the page a folder of parts makes, on stdout, for the build to turn
# into a C string. SHELL (the folder's page.html) is copied line by line, except that a
# line holding only `<!-- part: NAME -->` becomes the whole of the file NAME beside it.
# A part that cannot be read is an error, named, and nothing is written.
set -eu
dir=$(dirname "$1")
awk -v dir="$dir" '
  /^<!-- part: [A-Za-z0-9_.-]+ -->$/ {
    part = dir "/" $3
    while ((got = (getline line < part)) > 0) out = out line "\n"
    if (got < 0) { printf "join_page.sh: %s: cannot read the part %s\n", FILENAME, part > "/dev/stderr"; failed = 1; exit 1 }
    close(part)
    next
  }
  { out = out $0 "\n" }
  END { if (!failed) printf "%s", out }
' "$1"
