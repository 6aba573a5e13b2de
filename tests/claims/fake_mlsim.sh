#!/bin/sh
# A stand-in for `mlsim run` in the sweep machinery's tests: it accepts
#   run SCENARIO --out DIR [--quiet] [--variant V] [--set a=N] [--set b=N]...
# appends DIR to $FAKE_MLSIM_CALLS and writes DIR/summary.json with metrics computed from a and
# b (sum, product) and the variant's name length. It fails (exit 1) when a is 13.
[ "$1" = run ] || exit 3
shift
shift  # the scenario
out=""
a=0
b=0
variant=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --quiet) shift ;;
    --variant) variant=$2; shift 2 ;;
    --set)
      case $2 in
        a=*) a=${2#a=} ;;
        b=*) b=${2#b=} ;;
      esac
      shift 2 ;;
    *) echo "fake mlsim: unexpected argument $1" >&2; exit 4 ;;
  esac
done
[ -n "$FAKE_MLSIM_CALLS" ] && echo "$out" >> "$FAKE_MLSIM_CALLS"
if [ "$a" = 13 ]; then echo "fake mlsim: a=13 fails on purpose" >&2; exit 1; fi
mkdir -p "$out"
printf '{"metrics":{"sum":%s,"product":%s,"variant_len":%s},"scenario":{"a":%s}}\n' \
  $((a + b)) $((a * b)) ${#variant} "$a" > "$out/summary.json.tmp"
mv "$out/summary.json.tmp" "$out/summary.json"
