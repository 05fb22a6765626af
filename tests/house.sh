#!/usr/bin/env bash
# The house's rules, checked on the code itself (src/README.md states them):
#  - an #include points down the layers: main → cmd → cmdlib → serve, report → the analysis rooms
#    (heads, explain → attention → decode, score), the export (onnx: its reference reads the
#    attention maps) and train → run → data → nn → config → util, or to
#    a file of its own folder; train and the analysis rooms never include each other;
#  - no include circle between modules (a module is x.c with x.h);
#  - no call circle between modules: from the built objects (nm), module A calls B when
#    A's object needs a symbol B's object defines; the graph has no loop, so no two files
#    call each other;
#  - no file basename twice in src/: a command is cmd/NAME.c (as git's builtin/), and no
#    library file takes a command's name; a page (.html, .css, .js, built in as a C string)
#    is named whole, so attention/attnview.c may sit beside its page attnview.html (joined
#    from the parts in attention/viewer/);
#  - src/README.md names every C and C++ module, in its folder's row (a new file gets its line),
#    and every name it quotes (`snake_case`, a function, a string, a test) is still in src/ or
#    tests/: a renamed function leaves no stale name in the guide;
#  - the softmaxes' exp (nn/vecmath.c) compiles to vector code with the build's own compiler
#    and flags (build/cflags.stamp), where the compiler is gcc: on AVX2 CPUs a flag away
#    (-fno-trapping-math) it was one scalar call an element, and the classifier's softmax over
#    an 8,000-word vocabulary took 63 of a Multi30k step's 550 ms instead of 17.
# tsort (coreutils) finds the loops. Needs the objects of `make all` (BUILD, default build).
set -uo pipefail
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch house
obj=${BUILD:-build}/obj

rank() { # the layer of module $1 (a path under src/ without extension); lower is higher up
    case $1 in
    main | startup) echo 0 ;; cmd/*) echo 1 ;; cmdlib/*) echo 2 ;; serve/* | report/*) echo 3 ;;
    heads/* | explain/* | train/* | onnx/*) echo 4 ;; attention/*) echo 5 ;; decode/* | score/*) echo 6 ;; run/*) echo 7 ;;
    data/*) echo 8 ;; nn/*) echo 9 ;; config | config_yaml) echo 10 ;; util/*) echo 11 ;; *) echo 99 ;;
    esac
}
analysis() { [[ $1 == heads/* || $1 == explain/* || $1 == attention/* || $1 == decode/* || $1 == score/* ]]; }
folder() { [[ $1 == */* ]] && echo "${1%%/*}" || echo "."; }

# module edges "from to" of every quoted #include in src/
include_edges() {
    local f m t
    while IFS= read -r f; do
        m=${f#src/}
        m=${m%.*}
        grep -oE '^#include "[^"]+"' "$f" | sed -E 's/#include "(.*)\.h"/\1/' | while read -r t; do
            [[ $t != "$m" ]] && echo "$m $t"
        done
    done < <(find src -name '*.c' -o -name '*.h' -o -name '*.cc' | sort)
}
edges=$(include_edges)

# 1. layers
wrong=""
while read -r from to; do
    rf=$(rank "$from") rt=$(rank "$to")
    if [[ $rf == 99 || $rt == 99 ]]; then
        wrong+="$from -> $to (a module outside the layers); "
    elif ((rt < rf)) || { ((rt == rf)) && [[ $(folder "$from") != "$(folder "$to")" ]]; } ||
        { [[ $from == train/* ]] && analysis "$to"; } || { analysis "$from" && [[ $to == train/* ]]; }; then
        wrong+="$from -> $to; "
    fi
done <<<"$edges"
[[ -z $wrong ]] && ok includes_point_down_the_layers || bad includes_point_down_the_layers "$wrong"

# 2. include circles. tsort reports a loop on stderr; a planted one shows the check bites.
loops() { tsort 2>&1 >/dev/null | grep -v '^tsort: -: input contains a loop:$' | sed 's/^tsort: //' | tr '\n' ' '; }
[[ -n $(printf 'a b\nb a\n' | loops) ]] || bad circle_check_finds_a_planted_loop "tsort saw no loop in a -> b -> a"
l=$(loops <<<"$edges")
[[ -z $l ]] && ok no_include_circle || bad no_include_circle "modules in a loop: $l"

# 3. call circles, from the objects' symbols
call_edges() {
    local o m
    declare -A owner
    while IFS= read -r o; do
        m=${o#"$obj"/}
        m=${m%.o}
        [[ -f src/$m.c || -f src/$m.cc ]] || continue # an object left from a renamed file
        while read -r s; do owner[$s]=$m; done < <(nm --defined-only -g "$o" | awk 'NF == 3 { print $3 }')
    done < <(find "$obj" -name '*.o' ! -path '*/tests/*' ! -path '*/fuzz/*' ! -path '*/gen/*' | sort)
    while IFS= read -r o; do
        m=${o#"$obj"/}
        m=${m%.o}
        [[ -f src/$m.c || -f src/$m.cc ]] || continue # an object left from a renamed file
        nm -u "$o" | awk '{ print $2 }' | while read -r s; do
            t=${owner[$s]:-}
            [[ -n $t && $t != "$m" ]] && echo "$m $t"
        done
    done < <(find "$obj" -name '*.o' ! -path '*/tests/*' ! -path '*/fuzz/*' ! -path '*/gen/*' | sort)
}
if [[ ! -f $obj/main.o ]]; then
    bad no_call_circle "no objects under $obj: run make all first"
else
    calls=$(call_edges | sort -u)
    if [[ -z $calls ]]; then
        bad no_call_circle "no calls found between modules: nm read nothing"
    else
        l=$(loops <<<"$calls")
        [[ -z $l ]] && ok no_call_circle || bad no_call_circle "modules calling in a loop: $l"
    fi
fi

# 5. the guide names every module: src/README.md's row of a folder ("| `src/D/` |") names
# each of its C and C++ files in backticks (`name`), and a file at the top has a row of its own
unnamed=""
while IFS= read -r f; do
    b=$(basename "${f%.*}") d=$(dirname "$f")
    if [[ $d == src ]]; then
        grep -qF "| \`src/$b." src/README.md || unnamed+="$f "
    else
        grep -F "| \`$d/\` |" src/README.md | grep -qE "\`$b(\.cc?)?\`" || unnamed+="$f "
    fi
done < <(find src -name '*.c' -o -name '*.cc' | sort)
[[ -z $unnamed ]] && ok readme_names_every_module || bad readme_names_every_module "src/README.md does not name: $unnamed"
# its quoted names are the code's: each one a word of some file in src/ or tests/ other than itself
guide_names() { grep -oE '`[a-z][a-z0-9]*_[a-z0-9_]*(\([^`]*\))?`' "$1" | sed -E 's/^`([a-z0-9_]+).*/\1/' | sort -u; }
stale_in() { # stale_in GUIDE: the names it quotes that nothing in src/ or tests/ has
    local n
    for n in $(guide_names "$1"); do
        grep -rqw --exclude=README.md -e "$n" src tests || printf '%s ' "$n"
    done
}
planted=no_such_fn_$$ # spelt here in two parts: this file is in tests/
cp src/README.md "$T/guide.md" && echo "a name no code has: \`$planted()\`" >>"$T/guide.md"
[[ $(stale_in "$T/guide.md") == "$planted " ]] && ok stale_name_check_finds_a_planted_one ||
    bad stale_name_check_finds_a_planted_one "found: '$(stale_in "$T/guide.md")'"
stale=$(stale_in src/README.md)
[[ -z $stale ]] && ok readme_names_are_the_codes || bad readme_names_are_the_codes "src/README.md names what src/ and tests/ lack: $stale"

# 4. basenames
dups=$(find src -name '*.c' -o -name '*.cc' | grep -v '^src/cmd/' | xargs -n1 basename |
    sed 's/\.[a-z]*$//' | sort | uniq -d | tr '\n' ' ')
dups+=$(find src -name '*.html' -o -name '*.css' -o -name '*.js' | xargs -n1 basename | sort | uniq -d | tr '\n' ' ')
cmd_clash=$(for f in src/cmd/*.c; do
    b=$(basename "$f" .c)
    find src -name "$b.c" ! -path 'src/cmd/*' | head -1
done | tr '\n' ' ')
[[ -z $dups && -z ${cmd_clash// /} ]] && ok no_basename_twice || bad no_basename_twice "twice: $dups $cmd_clash"

# 5. exp in vector code
stamp=${BUILD:-build}/cflags.stamp
line=$(grep -n 'out\[i\] = exp_one(in\[i\] - shift)' src/nn/vecmath.c | cut -d: -f1)
if [[ ! -f $stamp || -z $line ]]; then
    bad exp_loop_vectorises "no $stamp (run make first) or no exp loop in src/nn/vecmath.c"
elif ! eval "cc=($(<"$stamp"))" || ! "${cc[0]}" --version 2>/dev/null | grep -qi 'gcc\|free software'; then
    skip exp_loop_vectorises "the compiler is not gcc: no -fopt-info"
else
    # the stamp's line as make's shell parsed it; no object and no dependency file written
    report=$(timeout 60 "${cc[@]}" $(pkg-config --cflags openblas 2>/dev/null) -fopt-info-vec-optimized \
        -c src/nn/vecmath.c -o /dev/null -MF /dev/null 2>&1)
    grep -q "vecmath.c:$line:[0-9]*: optimized: loop vectorized" <<<"$report" && ok exp_loop_vectorises ||
        bad exp_loop_vectorises "line $line of src/nn/vecmath.c is not vector code: $(grep ":$line:" <<<"$report" | head -2)"
fi

finish
