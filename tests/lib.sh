# Shared helpers of the shell tests: counters, one-line error checks, comparisons.
passed=0
failed=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() {
    echo "$passed passed, $failed failed"
    [[ $failed -eq 0 ]]
}

# expect_error NAME EXIT_CODE REGEX command...: the command fails with that code and
# prints exactly one line on stderr, matching REGEX.
expect_error() {
    local name=$1 code=$2 pattern=$3
    shift 3
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    if [[ $rc -ne $code ]]; then bad "$name" "exit $rc, expected $code: $err"; return; fi
    if [[ $(printf '%s\n' "$err" | wc -l) -ne 1 ]]; then bad "$name" "not one line: $err"; return; fi
    if ! grep -qE -- "$pattern" <<<"$err"; then bad "$name" "'$err' does not match '$pattern'"; return; fi
    ok "$name"
}

# exact_match HYP REF: percentage of identical lines
exact_match() { awk 'NR==FNR{h[NR]=$0;next}{n++; if(h[FNR]==$0)c++}END{printf "%.1f", n?100*c/n:0}' "$1" "$2"; }

# data_section FILE: the tensor bytes of a checkpoint (everything after the header)
data_section() {
    local hlen
    hlen=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
    tail -c +$((8 + hlen + 1)) "$1"
}

# same_tensors A B: the two checkpoints hold byte-identical weights and moments
same_tensors() { cmp -s <(data_section "$1") <(data_section "$2"); }

# tiny_config FILE NAME DATA_DIR 'TRAIN KEYS': a small, quick model (d_model 32, 2+2 layers)
# on the toy pair in DATA_DIR, with the given flow-style train: keys.
tiny_config() {
    printf 'name: %s
data:
  train: {src: %s/train.src, tgt: %s/train.tgt}
  valid: {src: %s/valid.src, tgt: %s/valid.tgt}
model: {d_model: 32, heads: 4, d_ff: 64, encoder_layers: 2, decoder_layers: 2, dropout: 0.1}
train: {%s}
' "$2" "$3" "$3" "$3" "$3" "$4" >"$1"
}
