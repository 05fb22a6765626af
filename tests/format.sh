#!/usr/bin/env bash
# The code's layout: every C and C++ source of src/ and tests/ (src/**/*.c, *.h, *.cc;
# tests/*.c, *.h; tests/fuzz/*.c, *.h; tests/shim/*.c: the files `make format` formats) is
# as clang-format leaves it under .clang-format. Run by `make lint`; `make format` mends
# what it finds. CLANG_FORMAT names the program (default clang-format: Debian 12's is
# version 14, which .clang-format is written for). Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}

if ! command -v "$CLANG_FORMAT" >/dev/null; then
    skip_missing format "$CLANG_FORMAT is not installed (scripts/deps.sh --with-format): the layout was NOT checked"
    finish
    exit
fi
if [[ ! -f .clang-format ]]; then
    bad format ".clang-format is missing: clang-format would check against its own default style"
    finish
    exit
fi

# The same files as the Makefile's FORMAT_SRC.
shopt -s nullglob
files=(tests/*.c tests/*.h tests/fuzz/*.c tests/fuzz/*.h tests/shim/*.c tests/shim/*.h)
while IFS= read -r f; do files+=("$f"); done < <(find src \( -name '*.c' -o -name '*.h' -o -name '*.cc' \) | sort)

# The check bites: a planted misformat is found.
"$BOUNDED" "$CLANG_FORMAT" --dry-run -Werror --assume-filename=src/planted.c <<<'int  planted;' >/dev/null 2>&1 &&
    bad format_check_finds_a_planted_misformat "$CLANG_FORMAT --dry-run -Werror passed 'int  planted;'"

# One run over every file: clang-format names each file that it would change, with the
# first place where it would (one error a file).
version=$("$CLANG_FORMAT" --version | grep -oE '[0-9]+(\.[0-9]+)+' | head -n 1)
out=$("$BOUNDED" "$CLANG_FORMAT" --style=file --dry-run -Werror --ferror-limit=1 "${files[@]}" 2>&1)
rc=$?
unformatted=$(grep -oE '^[^ :]+:[0-9]+:[0-9]+: error: code should be clang-formatted' <<<"$out" | cut -d: -f1,2 | sort -u)
name=sources_are_clang_formatted
if [[ $rc -eq 0 && -z $unformatted ]]; then
    ok "$name (${#files[@]} files, clang-format $version)"
elif [[ -n $unformatted ]]; then
    bad "$name" "$(wc -l <<<"$unformatted") of ${#files[@]} files are not as clang-format $version lays them out (make format mends them; file:first line): $(tr '\n' ' ' <<<"$unformatted")"
else
    bad "$name" "$CLANG_FORMAT exit $rc: $(tail -n 5 <<<"$out")"
fi
finish
