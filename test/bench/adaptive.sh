#!/usr/bin/env bash
# test/bench/adaptive.sh (scenario: adaptive limit).  The workload 'tpcb'
# through bulkhead.workload (transparent admission) with adaptive = true,
# min_running = 1, max_running = 64, against fixed limits and ungated, on
# pgbench's built-in scripts at scale 1 (-M simple):
#   1. tpcb-like, 128 clients: fixed B = 1..8, each law, ungated
#   2. simple-update (-N), 128 clients: fixed B = 2..128, each law, ungated
#   3. light loads, tpcb-like at 2, 8 and 32 clients: each law, ungated
#   4. shadow mode: the law in force with mode 'shadow' against 'enforce'
#   5. a shift: -N, tpcb-like, -N (PHASE seconds each, 128 clients) without a restart,
#      sampled every 100 ms (TPS from bulkhead_stats.released, and
#      current_limit), for the law in force and the best fixed B of each
#      phase; plotted into plots/adaptive-shift.png
#   6. outside CPU contention: tpcb-like at 128 clients, fixed B = 1..6, the
#      law in force and ungated, each with a busy loop on the server's CPU
#      (a process outside the server, as a build or a backup beside it would
#      be) and without one, alternating
# The laws are "holders" (the default) and "climb" (bulkhead.adaptive_law).
# An adaptive run starts where a workload that has just become adaptive
# starts (twice the server's CPUs, so 2 when the server is pinned to one),
# so its figures include its convergence.
#
#   bash test/bench/adaptive.sh [SECONDS [ROUNDS [PHASE]]]   (as root)
# Defaults: 10 s runs, 3 alternating rounds, 30 s phases.
# ADAPTIVE_SECTIONS="6" (say) runs only those sections (the targets of the
# others are then not judged); the default is all six.
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SECS=${1:-10}
ROUNDS=${2:-3}
PHASE=${3:-30}
LAWS=(holders climb)
SWEEP_TPCB=(1 2 3 4 5 6 7 8)
SWEEP_N=(2 4 8 16 32 64 128)
LIGHT=(2 8 32)
CONTENTION_B=(1 2 3 4 6)
MANY=128    # the clients of the sweeps, the shadow runs and the shift
SECTIONS=${ADAPTIVE_SECTIONS:-1 2 3 4 5 6}
if bench_quick; then
    # the smoke run: every section and target, but short runs, few series,
    # the default law only, and 32 clients (with -t, a run's time is mostly
    # its connections)
    SECS=1; ROUNDS=1; PHASE=2
    SWEEP_TPCB=(1 2); SWEEP_N=(2 8); LIGHT=(2); MANY=32; LAWS=(holders)
    CONTENTION_B=(2)
fi
# want N: is section N to run?
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

BH_PACKAGES+=(gnuplot-nox)
bench_prepare
bench_cluster_start "max_connections = 300"
bench_tpcb_setup 1 64

# limit_is N: until bulkhead_stats shows current_limit N for 'tpcb'
limit_is() {
    for _ in $(seq 200); do
        [ "$(bench_psql -tAc "SELECT current_limit FROM bulkhead_stats WHERE workload = 'tpcb'")" = "$1" ] && return
        sleep 0.05
    done
    bh_die "current_limit $1 was not loaded"
}

# configure SERIES: the workload as SERIES needs it (fixed-B, a law, ungated)
current_law=
configure() {
    case $1 in
        fixed-*)
            bench_psql -c "UPDATE bulkhead_workload SET adaptive = false, mode = 'enforce', max_running = ${1#fixed-} WHERE name = 'tpcb'"
            limit_is "${1#fixed-}" ;;
        ungated) ;;
        *)
            local law=${1#shadow-} mode=enforce
            [ "$law" != "$1" ] && mode=shadow
            if [ "$law" != "$current_law" ]; then
                bench_psql -c "ALTER SYSTEM SET bulkhead.adaptive_law = '$law'" -c "SELECT pg_reload_conf()" >/dev/null
                current_law=$law
                sleep 0.3    # the worker reads its configuration file
            fi
            # off, then on: the limit starts again as for a new adaptive workload
            bench_psql -c "UPDATE bulkhead_workload SET adaptive = false, max_running = 64 WHERE name = 'tpcb'"
            limit_is 64
            bench_psql -c "UPDATE bulkhead_workload SET adaptive = true, min_running = 1, mode = '$mode' WHERE name = 'tpcb'"
            sleep 0.2 ;;
    esac
}

# run SERIES/BUILTIN/CLIENTS[/busy]: one pgbench run ("TPS P99 FAILED");
# with /busy, a busy loop runs on the server's CPU throughout
run() {
    local series builtin clients rest hog='' out
    IFS=/ read -r series builtin clients rest <<<"$1"
    configure "$series" >/dev/null
    bench_tpcb_reset
    local user=(-U gated)
    [ "$series" = ungated ] && user=()
    if [ "$rest" = busy ]; then
        "${BENCH_SERVER_CPU[@]}" bash -c 'while :; do :; done' &
        hog=$!
    fi
    out=$(bench_pgbench -M simple -c "$clients" -j "$((clients < 2 ? 1 : 2))" -T "$SECS" \
        -b "$builtin" "${user[@]}") || { [ -z "$hog" ] || kill "$hog"; exit 1; }
    if [ -n "$hog" ]; then kill "$hog"; wait "$hog" 2>/dev/null || true; fi
    echo "$out"
}

# sampler FILE: every 100 ms, "epoch released current_limit queued" into FILE
# (a psql of its own, on the load generator's CPU), until killed
sampler_start() {
    echo "SELECT extract(epoch FROM clock_timestamp()), released, current_limit, queued FROM bulkhead_stats WHERE workload = 'tpcb' \\watch 0.1" |
        "${BENCH_CLIENT_CPU[@]}" runuser -u postgres -- "$BH_BINDIR/psql" -X -q -At -F ' ' -P footer=off \
        -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres >"$1" 2>/dev/null &
    SAMPLER=$!
}
sampler_stop() { kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; }

# limits_seen FILE [FROM_S]: "median min max" of current_limit in FILE,
# from FROM_S seconds after its first sample
limits_seen() {
    awk -v from="${2:-0}" 'NR == 1 { t0 = $1 } $1 - t0 >= from { print $3 }' "$1" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "- - -"; else print v[int((NR + 1) / 2)], v[1], v[NR] }'
}

# limits_per_run FILE FROM_S: like limits_seen, over the samples of several
# runs appended in FILE, each from FROM_S seconds after its own start (a
# gap of more than 1 s between samples starts a run)
limits_per_run() {
    awk -v from="$2" 'NR == 1 || $1 - pt > 1 { t0 = $1 } $1 - t0 >= from { print $3 } { pt = $1 }' "$1" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "- - -"; else print v[int((NR + 1) / 2)], v[1], v[NR] }'
}

series_list() {    # series_list BUILTIN CLIENTS SERIES...
    local b=$1 c=$2 s
    shift 2
    for s in "$@"; do printf '%s/%s/%s ' "$s" "$b" "$c"; done
}

# 1 and 2: the sweeps at MANY clients
declare -A BEST_B
sweep_table() {    # sweep_table BUILTIN LABEL B...
    local builtin=$1 label=$2 b best=-1 keys
    shift 2
    # shellcheck disable=SC2207
    keys=($(series_list "$builtin" "$MANY" "${@/#/fixed-}" "${LAWS[@]}" ungated))
    bench_alternate "$ROUNDS" run "${keys[@]}"
    for b in "$@"; do
        if [ "${TPS[fixed-$b/$builtin/$MANY]}" -gt "$best" ]; then best=${TPS[fixed-$b/$builtin/$MANY]} BEST_B[$builtin]=$b; fi
    done
    echo "### $label, $MANY clients"
    echo
    echo "| series | TPS (median) | rounds | p99 ms | failed |"
    echo "|---|---:|---|---:|---:|"
    for k in "${keys[@]}"; do
        echo "| ${k%%/*} | ${TPS[$k]} | ${RUNS_TPS[$k]} | ${P99[$k]} | ${FAILED[$k]} |"
    done
    echo
    echo "Best fixed B: **${BEST_B[$builtin]}** (${TPS[fixed-${BEST_B[$builtin]}/$builtin/$MANY]} TPS, p99 ${P99[fixed-${BEST_B[$builtin]}/$builtin/$MANY]} ms)."
    echo
}

bench_header "Adaptive limit (pgbench -M simple, scale 1, ${SECS} s runs, median of $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`$([ "$SECTIONS" = "1 2 3 4 5 6" ] || echo "ADAPTIVE_SECTIONS=\"$SECTIONS\" ")bash test/bench/adaptive.sh $SECS $ROUNDS $PHASE\`. Every series goes through bulkhead.workload (transparent admission) but ungated." \
     "Adaptive series (named by their law, \`bulkhead.adaptive_law\`): \`adaptive = true, min_running = 1, max_running = 64\`, made adaptive afresh before every run (so starting at twice the server's CPUs)." \
     "Fixed series: \`adaptive = false\`, \`max_running = B\`. The workload's queue: 1000 callers, 60 s."
echo
if want 1; then sweep_table tpcb-like "tpcb-like" "${SWEEP_TPCB[@]}"; fi
if want 2; then sweep_table simple-update "simple-update (-N)" "${SWEEP_N[@]}"; fi

# 3: light loads
if want 3; then
# shellcheck disable=SC2207
light_keys=($(for c in "${LIGHT[@]}"; do series_list tpcb-like "$c" "${LAWS[@]}" ungated; done))
bench_alternate "$ROUNDS" run "${light_keys[@]}"
echo "### Light loads, tpcb-like"
echo
echo "| clients | ungated TPS | $(printf '%s TPS | ' "${LAWS[@]}")$(printf '%s / ungated | ' "${LAWS[@]}")"
echo "|---:|---:|$(printf -- '---:|%.0s' "${LAWS[@]}" "${LAWS[@]}")"
for c in "${LIGHT[@]}"; do
    row="| $c | ${TPS[ungated/tpcb-like/$c]} |"
    for l in "${LAWS[@]}"; do row+=" ${TPS[$l/tpcb-like/$c]} |"; done
    for l in "${LAWS[@]}"; do row+=" $(bench_ratio "${TPS[$l/tpcb-like/$c]}" "${TPS[ungated/tpcb-like/$c]}") |"; done
    echo "$row"
done
echo
fi

# 4: shadow against enforce, for each law, with the limit sampled
shadow_run() {    # KEY = law or shadow-law: also samples the limit
    local file=$BENCH_DIR/limits-$1-$RANDOM.txt
    configure "$1" >/dev/null
    bench_tpcb_reset
    bench_psql -c "SELECT bulkhead_stats_reset('tpcb')" >/dev/null
    sampler_start "$file"
    local out
    out=$(bench_pgbench -M simple -c "$MANY" -j 2 -T "$SECS" -b tpcb-like -U gated)
    sampler_stop
    cat "$file" >>"$BENCH_DIR/limits-$1.all"
    bench_psql -tAc "SELECT peak_queued, rejected_full, timed_out, shadow_queued FROM bulkhead_stats WHERE workload = 'tpcb'" \
        >>"$BENCH_DIR/counts-$1.all"
    echo "$out"
}
if want 4; then
# shellcheck disable=SC2207
shadow_keys=($(for l in "${LAWS[@]}"; do echo "$l shadow-$l"; done))
for k in "${shadow_keys[@]}"; do rm -f "$BENCH_DIR/limits-$k.all" "$BENCH_DIR/counts-$k.all"; done
bench_alternate "$ROUNDS" shadow_run "${shadow_keys[@]}"
echo "### Shadow mode, tpcb-like, $MANY clients"
echo
echo "current_limit sampled every 100 ms from 2 s into each run to its end (all rounds together); in shadow mode the limit is computed and shown but not enforced."
echo
echo "| series | TPS | current_limit median | min | max | peak queued | rejected | timed out | shadow_queued |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for k in "${shadow_keys[@]}"; do
    read -r med lo hi <<<"$(limits_per_run "$BENCH_DIR/limits-$k.all" 2)"
    read -r pq rj to sq <<<"$(awk -F'|' '{ if ($1 > q) q = $1; r += $2; t += $3; s += $4 } END { print q + 0, r + 0, t + 0, s + 0 }' "$BENCH_DIR/counts-$k.all")"
    echo "| $k | ${TPS[$k]} | $med | $lo | $hi | $pq | $rj | $to | $sq |"
done
echo
fi

# 5: the shift, one series at a time, ROUNDS rounds
shift_run() {    # shift_run SERIES ROUND: the three phases, sampled
    local series=$1 round=$2 file=$BENCH_DIR/shift-$1-$2.txt
    configure "$series" >/dev/null
    bench_tpcb_reset
    sampler_start "$file"
    for b in simple-update tpcb-like simple-update; do
        bench_pgbench -M simple -c "$MANY" -j 2 -T "$PHASE" -b "$b" -U gated >/dev/null
    done
    sampler_stop
}
if want 5; then
shift_series=("${LAWS[0]}" "fixed-${BEST_B[simple-update]:-8}" "fixed-${BEST_B[tpcb-like]:-3}")
# shellcheck disable=SC2207
shift_series=($(printf '%s\n' "${shift_series[@]}" | awk '!seen[$0]++'))
for ((r = 1; r <= ROUNDS; r++)); do
    for s in "${shift_series[@]}"; do
        bench_progress "shift round $r/$ROUNDS, $s"
        shift_run "$s" "$r"
    done
done

# per sample: seconds since start, TPS over the last 100 ms, current_limit
shift_curve() {
    awk 'NR == 1 { t0 = $1 } NR > 1 && $1 > pt { printf "%.2f %.0f %d\n", $1 - t0, ($2 - pr) / ($1 - pt), $3 }
         { pt = $1; pr = $2 }' "$1"
}
# phase_tps FILE PHASE_INDEX FROM TO: mean TPS between FROM and TO seconds
# into phase PHASE_INDEX (0, 1, 2)
phase_tps() {
    shift_curve "$1" | awk -v a="$(($2 * PHASE + $3))" -v b="$(($2 * PHASE + $4))" \
        '$1 >= a && $1 < b { s += $2; n++ } END { printf "%.0f", n ? s / n : 0 }'
}
echo "### Shift: simple-update, tpcb-like, simple-update (${PHASE} s each), $MANY clients, without a restart"
echo
echo "TPS from bulkhead_stats.released sampled every 100 ms; columns: mean TPS over the phase's second half, and over the 10 s to the phase's end from 10 s into it (medians of $ROUNDS rounds)."
echo
echo "| series | -N (1) | tpcb-like (2) | -N (3) | 2: from 10 s | 3: from 10 s |"
echo "|---|---:|---:|---:|---:|---:|"
declare -A PH
for s in "${shift_series[@]}"; do
    row="| $s |"
    for spec in "0 $((PHASE / 2)) $PHASE" "1 $((PHASE / 2)) $PHASE" "2 $((PHASE / 2)) $PHASE" "1 10 $PHASE" "2 10 $PHASE"; do
        read -r p a b <<<"$spec"
        v=$(for ((r = 1; r <= ROUNDS; r++)); do phase_tps "$BENCH_DIR/shift-$s-$r.txt" "$p" "$a" "$b"; echo; done | bench_median)
        PH[$s/$p/$a]=$v
        row+=" $v |"
    done
    echo "$row"
done
echo
if [ -n "$BENCH_OUT" ]; then
    for s in "${shift_series[@]}"; do shift_curve "$BENCH_DIR/shift-$s-1.txt" >"$BENCH_OUT/adaptive-shift-$s.dat"; done
    gnuplot -e "dir='$BENCH_OUT'; out='$BENCH_OUT/adaptive-shift.png'; law='${LAWS[0]}'; fixed_n='fixed-${BEST_B[simple-update]}'; fixed_t='fixed-${BEST_B[tpcb-like]}'; phase=$PHASE" \
        "$here/adaptive.gp"
fi
fi

# 6: outside CPU contention, with and without a busy loop on the server's CPU
if want 6; then
# shellcheck disable=SC2207
busy_keys=($(for m in busy quiet; do series_list tpcb-like "$MANY" "${CONTENTION_B[@]/#/fixed-}" "${LAWS[0]}" ungated | sed "s|[^ ]\{1,\}|&/$m|g"; done))
bench_alternate "$ROUNDS" run "${busy_keys[@]}"
echo "### Outside CPU contention: tpcb-like, $MANY clients, with a busy loop on the server's CPU"
echo
echo "\"busy\": a shell loop that never sleeps runs on the server's CPU (\`${BENCH_SERVER_CPU[*]:-unpinned} bash -c 'while :; do :; done'\`, same priority as the server) during the run; \"quiet\": without it. The law in force: ${LAWS[0]}."
echo
echo "| series | busy TPS | rounds | p99 ms | quiet TPS | rounds | p99 ms |"
echo "|---|---:|---|---:|---:|---|---:|"
declare -A BEST_BUSY
for m in busy quiet; do BEST_BUSY[$m]=; done
for s in "${CONTENTION_B[@]/#/fixed-}" "${LAWS[0]}" ungated; do
    b=$s/tpcb-like/$MANY/busy q=$s/tpcb-like/$MANY/quiet
    echo "| $s | ${TPS[$b]} | ${RUNS_TPS[$b]} | ${P99[$b]} | ${TPS[$q]} | ${RUNS_TPS[$q]} | ${P99[$q]} |"
    case $s in
        fixed-*)
            for m in busy quiet; do
                k=$s/tpcb-like/$MANY/$m
                if [ -z "${BEST_BUSY[$m]}" ] || [ "${TPS[$k]}" -gt "${TPS[${BEST_BUSY[$m]}]}" ]; then BEST_BUSY[$m]=$k; fi
            done ;;
    esac
done
echo
for m in busy quiet; do
    best=${BEST_BUSY[$m]}
    r=$(bench_ratio "${TPS[${LAWS[0]}/tpcb-like/$MANY/$m]}" "${TPS[$best]}")
    bench_at_least "$r" 0.9 && met=0 || met=1
    bench_target "adaptive (${LAWS[0]}), tpcb-like at $MANY clients, $m: ≥ 0.9× the best fixed B (${best%%/*}, ${TPS[$best]} TPS) (${r}×)" "$met"
done
echo
fi
[ "$SECTIONS" = "1 2 3 4 5 6" ] || exit 0

# targets (the first law is the one kept)
law=${LAWS[0]}
bt=${BEST_B[tpcb-like]} bn=${BEST_B[simple-update]}
r=$(bench_ratio "${TPS[$law/tpcb-like/$MANY]}" "${TPS[fixed-$bt/tpcb-like/$MANY]}")
bench_at_least "$r" 0.9 && met=0 || met=1
bench_target "adaptive ($law), tpcb-like at $MANY clients: ≥ 0.9× the best fixed B ($bt) (${r}×)" $met
r=$(bench_ratio "${P99[$law/tpcb-like/$MANY]}" "${P99[fixed-$bt/tpcb-like/$MANY]}")
bench_at_least 1.5 "$r" && met=0 || met=1
bench_target "adaptive ($law), tpcb-like at $MANY clients: p99 ≤ 1.5× that B's (${P99[$law/tpcb-like/$MANY]} ms against ${P99[fixed-$bt/tpcb-like/$MANY]} ms, ${r}×)" $met
f=$((FAILED[$law/tpcb-like/$MANY] + FAILED[$law/simple-update/$MANY]))
bench_target "adaptive ($law): no failed transaction at $MANY clients ($f failed)" "$([ "$f" = 0 ] && echo 0 || echo 1)"
r=$(bench_ratio "${TPS[$law/simple-update/$MANY]}" "${TPS[fixed-$bn/simple-update/$MANY]}")
bench_at_least "$r" 0.9 && met=0 || met=1
bench_target "adaptive ($law), -N at $MANY clients: ≥ 0.9× the best fixed B ($bn) (${r}×)" $met
r=$(bench_ratio "${TPS[$law/simple-update/$MANY]}" "${TPS[ungated/simple-update/$MANY]}")
bench_at_least "$r" 0.9 && met=0 || met=1
bench_target "adaptive ($law), -N at $MANY clients: ≥ 0.9× ungated (${r}×)" $met
for c in "${LIGHT[@]}"; do
    r=$(bench_ratio "${TPS[$law/tpcb-like/$c]}" "${TPS[ungated/tpcb-like/$c]}")
    bench_at_least "$r" 0.9 && met=0 || met=1
    bench_target "adaptive ($law), tpcb-like at $c clients: ≥ 0.9× ungated (${r}×)" $met
done
read -r pq rj to _ <<<"$(awk -F'|' '{ if ($1 > q) q = $1; r += $2; t += $3 } END { print q + 0, r + 0, t + 0 }' "$BENCH_DIR/counts-shadow-$law.all")"
bench_target "shadow + adaptive ($law): nothing queued, rejected or timed out (peak queued $pq, $rj rejected, $to timed out)" \
    "$([ "$pq$rj$to" = 000 ] && echo 0 || echo 1)"
read -r me _ <<<"$(limits_per_run "$BENCH_DIR/limits-$law.all" 2)"
read -r ms _ <<<"$(limits_per_run "$BENCH_DIR/limits-shadow-$law.all" 2)"
bench_target "shadow + adaptive ($law): current_limit moves as when enforced (median $ms against $me)" \
    "$(awk -v a="$ms" -v b="$me" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1 || d <= 0.34 * b) }' && echo 0 || echo 1)"
for spec in "1 fixed-$bt" "2 fixed-$bn"; do
    read -r p ref <<<"$spec"
    r=$(bench_ratio "${PH[$law/$p/10]}" "${PH[$ref/$p/10]}")
    bench_at_least "$r" 0.8 && met=0 || met=1
    bench_target "shift, phase $((p + 1)): adaptive ($law) from 10 s into the phase within 20% of $ref (${r}×)" $met
done
