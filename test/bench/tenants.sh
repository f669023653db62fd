#!/usr/bin/env bash
# test/bench/tenants.sh: tenants (keys) inside one workload.  One workload
# "shop" of PERMITS permits (default 2), reached by transparent admission:
# the role "app" has bulkhead.workload = 'shop', so every transaction of
# its sessions takes a permit.  The tenants run pgbench's built-in script
# TENANT_BUILTIN (-M simple, scale 1) as that role: tpcb-like (the
# default) or simple-update.  tpcb-like updates the one row of
# pgbench_branches in every transaction, so at scale 1 every tenant's
# transactions also queue for that row's lock, whatever admits them;
# simple-update touches a random account only, as tenants of one schema
# do, each with rows of its own:
#   noisy    64 clients, one pgbench
#   quiet    8 tenants of 1 client each, one pgbench per tenant, each at
#            most QUIET_RATE transactions per second (pgbench -R; default
#            25: quiet tenants ask for a small part of what the workload
#            serves; QUIET_RATE=0: back to back, as fast as they can)
# Each tenant names itself at connection start, as an application would:
# PGOPTIONS='-c bulkhead.key=quiet-3' (bulkhead.key is user-settable).
# Series, alternating, ROUNDS rounds of SECONDS each:
#   fifo     noisy and quiet, no key (the workload's queue in arrival order)
#   keys     noisy and quiet, each tenant its key: the least served key
#            first, FIFO within a key
#   cap      the same with max_running_per_key = 1 (one tenant holds at
#            most one of the permits)
#   silo     the quiet tenants in a workload of their own ("quiet", PERMITS
#            permits, as the role quietapp), the noisy tenant in "shop": the
#            quiet tenants never wait for a permit of the noisy tenant's,
#            but share the machine with it.  What no order of service in
#            one workload can beat: the floor for keys
#   alone    the quiet tenants with their keys, the noisy tenant absent
#            (the baseline)
# The noisy clients start first; the quiet ones once all 64 are connected
# (a storm of 64 connections distorts the quiet tenants' latency).  Each
# quiet tenant's p99 comes from its pgbench's latency log.  The noisy
# tenant's throughput is counted over the quiet tenants' window only (the
# noisy pgbench runs a few seconds longer, connecting before and draining
# after): the workload's grants over the window (bulkhead_stats.acquired,
# one per transaction), less the quiet tenants' transactions, per second.
#
# The throughput that is left: what the workload serves with noisy and
# quiet all in one FIFO queue (the fifo series' total TPS: its capacity
# under this load) less what the quiet tenants take in the series at hand.
# Keys should give the quiet tenants what they ask for, and the noisy
# tenant the rest: its TPS in the keys series against that remainder.
# Targets (issue 22): with keys, each quiet tenant's p99 ≤ 1.5× its p99
# with the noisy tenant absent, and the noisy tenant ≥ 0.9× the throughput
# that is left.  Each throughput is the median of the rounds; each quiet
# tenant's p99 is over all its transactions of all the rounds (its latency
# logs pooled), and the spread of its rounds' p99 is printed beside it.
# The output also gives the p99 of all the quiet tenants' transactions
# pooled (eight times the transactions of one tenant), and the
# measurement's resolution: the baseline against itself (its first rounds
# against its last ones), per tenant and pooled.
#
# Eight quiet tenants of one client each ask for more than B = 2 permits
# can serve (alone, they keep the workload busy), so little or nothing may
# be left by that definition (less than nothing when the fifo series, whose
# grants go round 72 backends, serves fewer transactions than the quiet
# tenants alone).  The output then also gives the noisy tenant's share of
# the transactions beside its share as one key of 9 served least served
# first: at least 1/9 of the permit-time while it waits.
#
#   bash test/bench/tenants.sh [SECONDS [ROUNDS [PERMITS]]]   (as root;
#                                        default 20 3 2, about 8 minutes)
#   BENCH_QUICK=1 bash test/bench/tenants.sh     smoke run (figures meaningless)
#
# The server runs on CPU 0 and every pgbench on CPU 1 (cluster.sh).
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if bench_quick; then SECS=${1:-1}; ROUNDS=${2:-1}; else SECS=${1:-20}; ROUNDS=${2:-3}; fi
PERMITS=${3:-2}
QUIET_RATE=${QUIET_RATE:-25}
TENANT_BUILTIN=${TENANT_BUILTIN:-tpcb-like}
case $TENANT_BUILTIN in tpcb-like|simple-update) ;; *) bh_die "TENANT_BUILTIN must be tpcb-like or simple-update" ;; esac
case $QUIET_RATE in *[!0-9]*|'') bh_die "QUIET_RATE must be a number of transactions per second" ;; esac
case $SECS$ROUNDS$PERMITS in *[!0-9]*|'') bh_die "usage: bash test/bench/tenants.sh [SECONDS [ROUNDS [PERMITS]]]" ;; esac
NOISY_CLIENTS=64
QUIET=8
# the noisy pgbench runs this many seconds longer than the quiet ones: it
# connects before them (64 connections take a second or more on a busy
# machine), and must still run when they end (a pgbench of one client takes
# a second or two beyond its -T to start and to end)
NOISY_EXTRA=10
# a smoke run: 16 noisy clients; transactions, not seconds (bench_run_length)
NOISY_XACTS=$BENCH_QUICK_XACTS QUIET_XACTS=$BENCH_QUICK_XACTS
if bench_quick; then NOISY_CLIENTS=16 NOISY_XACTS=256 QUIET_XACTS=32; fi
SERIES=(fifo keys cap silo alone)

load_start=$(awk '{ print $1, $2, $3 }' /proc/loadavg)
bench_prepare
# A p99 of a few hundred transactions is set by the slowest few: a
# checkpoint's writes or an autovacuum run on the server's CPU in one
# series and not in the next would be measured as a difference between the
# series.  So neither starts on its own during a run (no timed checkpoint
# within checkpoint_timeout, no WAL-driven one within max_wal_size; no
# autovacuum), and each run starts after a VACUUM of the tables it updates
# and a CHECKPOINT (quiet_reset).
bench_cluster_start "max_connections = $((NOISY_CLIENTS + QUIET + 20))" \
    "checkpoint_timeout = '1h'" "max_wal_size = '16GB'" "autovacuum = off"
bench_progress "pgbench -i -s 1"
runuser -u postgres -- "$BH_BINDIR/pgbench" -i -q -s 1 -h "$BENCH_DIR" -p "$BENCH_PORT" postgres >/dev/null 2>&1 ||
    bh_die "pgbench -i failed"
bench_psql <<SQL
INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
VALUES ('shop', $PERMITS, 1000, '60s'), ('quiet', $PERMITS, 1000, '60s');
CREATE ROLE app LOGIN;
ALTER ROLE app SET bulkhead.workload = 'shop';
CREATE ROLE quietapp LOGIN;
ALTER ROLE quietapp SET bulkhead.workload = 'quiet';
GRANT ALL ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO app, quietapp;
SQL
bench_wait_loaded shop
bench_wait_loaded quiet

# tenant_pgbench NAME KEYED CLIENTS XACTS SECONDS [ROLE]: one tenant's
# pgbench as ROLE (default app), application_name NAME, and bulkhead.key
# NAME if KEYED is 1; prints bench_pgbench's "TPS P99_MS FAILED"
tenant_pgbench() {
    local name=$1 keyed=$2 clients=$3 xacts=$4 secs=$5 role=${6:-app} opts=
    [ "$keyed" = 0 ] || opts="-c bulkhead.key=$name"
    local -a rate=()
    # the quiet tenants (one client each) ask for at most QUIET_RATE TPS
    if [ "$clients" = 1 ] && [ "$QUIET_RATE" -gt 0 ] && ! bench_quick; then rate=(-R "$QUIET_RATE"); fi
    PGOPTIONS=$opts PGAPPNAME=$name BENCH_QUICK_XACTS=$xacts \
        bench_pgbench -M simple -U "$role" -c "$clients" -j "$((clients < 2 ? 1 : 2))" -T "$secs" "${rate[@]}" -b "$TENANT_BUILTIN"
}

# quiet_reset: bench_tpcb_reset, a VACUUM of the accounts (updated by every
# transaction; autovacuum is off) and a CHECKPOINT, before each run
quiet_reset() {
    bench_tpcb_reset
    bench_psql -c "VACUUM pgbench_accounts" -c "CHECKPOINT" >/dev/null
}

# run SERIES: one run; prints
#   NOISY_TPS QUIET_TPS FAILED KEYS P99_1 ... P99_QUIET
# NOISY_TPS "-" when the noisy tenant is absent; KEYS what bulkhead_keys
# showed half-way through ("-" if nothing)
run() {
    local series=$1 keyed=1 noisy=1 i pid_noisy="" s0 s1 quiet_tps=0 failed=0 tps p99 f keys
    local quiet_role=app quiet_in_shop=1
    local -a pids=() p99s=()
    case $series in
        fifo) keyed=0 ;;
        silo) quiet_role=quietapp quiet_in_shop=0 ;;
        alone) noisy=0 ;;
    esac
    if [ "$series" = cap ]; then bench_set_column shop max_running_per_key 1; else bench_set_column shop max_running_per_key NULL; fi
    quiet_reset
    if [ $noisy = 1 ]; then
        tenant_pgbench noisy "$keyed" "$NOISY_CLIENTS" "$NOISY_XACTS" "$((SECS + NOISY_EXTRA))" >"$BENCH_DIR/noisy.out" &
        pid_noisy=$!
        for i in $(seq 400); do
            [ "$(bench_psql -tAc "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'noisy'")" -ge "$NOISY_CLIENTS" ] && break
            sleep 0.05
        done
        [ "$i" -lt 400 ] || bh_die "$series: the $NOISY_CLIENTS noisy clients did not connect within 20 s"
    fi
    # the window: from before the quiet tenants start to after they end
    s0=$(bench_psql -tAc "SELECT acquired, extract(epoch FROM clock_timestamp()) FROM bulkhead_stats WHERE workload = 'shop'")
    for ((i = 1; i <= QUIET; i++)); do
        BENCH_LATENCY_FILE="$BENCH_DIR/latency-$series-$i.r$r" \
            tenant_pgbench "quiet-$i" "$keyed" 1 "$QUIET_XACTS" "$SECS" "$quiet_role" >"$BENCH_DIR/quiet-$i.out" &
        pids+=($!)
    done
    if bench_quick; then sleep 0.2; else sleep "$((SECS / 2))"; fi
    keys=$(bench_psql -tAc "SELECT coalesce(string_agg(format('%s %s/%s', key, running, queued), ', ' ORDER BY key), '-')
                            FROM bulkhead_keys WHERE workload = 'shop'")
    for ((i = 1; i <= QUIET; i++)); do
        wait "${pids[i - 1]}" || bh_die "$series: the pgbench of quiet-$i failed"
    done
    s1=$(bench_psql -tAc "SELECT acquired, extract(epoch FROM clock_timestamp()) FROM bulkhead_stats WHERE workload = 'shop'")
    if [ $noisy = 1 ] && ! bench_quick &&
        [ "$(bench_psql -tAc "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'noisy'")" -lt "$NOISY_CLIENTS" ]; then
        bh_die "$series: the noisy tenant ended before the quiet ones (it connected too slowly: raise NOISY_EXTRA)"
    fi
    if [ -n "$pid_noisy" ]; then wait "$pid_noisy" || bh_die "$series: the noisy pgbench failed"; fi
    for ((i = 1; i <= QUIET; i++)); do
        read -r tps p99 f <"$BENCH_DIR/quiet-$i.out"
        quiet_tps=$((quiet_tps + tps)) failed=$((failed + f))
        p99s+=("$p99")
    done
    if [ $noisy = 1 ]; then
        read -r _ _ f <"$BENCH_DIR/noisy.out"
        failed=$((failed + f))
        # the grants over the window, less the quiet tenants' transactions
        # (their TPS over the SECS they ran; in a smoke run, over the window)
        # if they took shop's permits
        tps=$(awk -v a="$s0" -v b="$s1" -v q="$((quiet_tps * quiet_in_shop))" -v secs="$(bench_quick && echo 0 || echo "$SECS")" '
            BEGIN { split(a, x, "|"); split(b, y, "|"); w = y[2] - x[2]
                    n = (y[1] - x[1] - q * (secs > 0 ? secs : w)) / w; printf "%.0f", (n < 0 ? 0 : n) }')
    else
        tps=-
    fi
    echo "$tps $quiet_tps $failed ${keys// /_} ${p99s[*]}"
}

# QP99: each quiet tenant's p99 over all its transactions of all the
# rounds of a series (the latency logs pooled: a round of SECS s gives a
# tenant SECS × QUIET_RATE transactions, too few for a steady p99 of its
# own); ROUND_P99: the p99 of each round, for the spread
declare -A NOISY QUIET_TPS FAILS KEYS_SEEN QP99 ROUND_P99
for s in "${SERIES[@]}"; do
    NOISY[$s]="" QUIET_TPS[$s]="" FAILS[$s]=0 KEYS_SEEN[$s]=""
    for ((i = 1; i <= QUIET; i++)); do ROUND_P99[$s/$i]=""; rm -f "$BENCH_DIR/latency-$s-$i".r*; done
done
for ((r = 1; r <= ROUNDS; r++)); do
    for s in "${SERIES[@]}"; do
        out=$(run "$s") || exit 1
        read -r nt qt f k rest <<<"$out"
        read -r -a p <<<"$rest"
        bench_progress "round $r/$ROUNDS, $s: noisy $nt TPS, quiet $qt TPS, quiet p99 ${p[*]} ms, $f failed"
        NOISY[$s]+="$nt " QUIET_TPS[$s]+="$qt " FAILS[$s]=$((FAILS[$s] + f))
        KEYS_SEEN[$s]=${k//_/ }
        for ((i = 1; i <= QUIET; i++)); do ROUND_P99[$s/$i]+="${p[i - 1]} "; done
    done
done
# latencies SERIES TENANT FIRST LAST: the latencies (us) of quiet tenant
# TENANT (1..QUIET; 0: all of them) in SERIES, rounds FIRST to LAST
latencies() {
    local i r
    for ((i = ($2 > 0 ? $2 : 1); i <= ($2 > 0 ? $2 : QUIET); i++)); do
        for ((r = $3; r <= $4; r++)); do cat "$BENCH_DIR/latency-$1-$i.r$r"; done
    done
}
med() { if [[ $1 == -* ]]; then echo -; else bench_median <<<"$1"; fi; }
declare -A worst total
for s in "${SERIES[@]}"; do
    NOISY[$s]=$(med "${NOISY[$s]}") QUIET_TPS[$s]=$(med "${QUIET_TPS[$s]}")
    worst[$s]=0
    for ((i = 1; i <= QUIET; i++)); do
        QP99[$s/$i]=$(latencies "$s" "$i" 1 "$ROUNDS" | bench_p99)
        bench_at_least "${worst[$s]}" "${QP99[$s/$i]}" || worst[$s]=${QP99[$s/$i]}
    done
    total[$s]=$(awk -v a="${NOISY[$s]}" -v b="${QUIET_TPS[$s]}" 'BEGIN { printf "%.0f", (a == "-" ? 0 : a) + b }')
done
# the throughput that is left for the noisy tenant in series S: the fifo
# series' total less what the quiet tenants take in S
left() { awk -v t="${total[fifo]}" -v q="${QUIET_TPS[$1]}" 'BEGIN { printf "%.0f", t - q }'; }
stats=$(bench_psql -tAc "SELECT format('acquired %s, rejected %s, timed out %s, peak_running %s, peak_queued %s', acquired, rejected_full, timed_out, peak_running, peak_queued)
                         FROM bulkhead_stats WHERE workload = 'shop'")
load_end=$(awk '{ print $1, $2, $3 }' /proc/loadavg)

# quiet_table CELL: a table of a row per series and a column per quiet
# tenant, each cell what "CELL SERIES TENANT" prints
quiet_table() {
    local s i
    printf '| series |'; for ((i = 1; i <= QUIET; i++)); do printf ' quiet-%d |' "$i"; done; echo
    printf '|---|'; for ((i = 1; i <= QUIET; i++)); do printf -- '---:|'; done; echo
    for s in "${SERIES[@]}"; do
        printf '| %s |' "$s"
        for ((i = 1; i <= QUIET; i++)); do printf ' %s |' "$("$1" "$s" "$i")"; done
        echo
    done
}
# the pooled p99, and against alone's
pooled_cell() {
    if [ "$1" = alone ]; then echo "${QP99[$1/$2]}"
    else echo "${QP99[$1/$2]} ($(bench_ratio "${QP99[$1/$2]}" "${QP99[alone/$2]}")×)"; fi
}
# lo_hi: "lowest–highest" of the numbers on stdin (one a line)
lo_hi() { sort -g | awk 'NF { if (!n++) lo = $1; hi = $1 } END { printf "%s–%s", lo, hi }'; }
# the lowest and highest of the rounds' p99
spread_cell() { tr ' ' '\n' <<<"${ROUND_P99[$1/$2]}" | lo_hi; }

describe() {
    case $1 in
        fifo) echo "fifo: no keys, one queue in arrival order" ;;
        keys) echo "keys: a key per tenant" ;;
        cap) echo "cap: a key per tenant, max_running_per_key = 1" ;;
        silo) echo "silo: the quiet tenants in a workload of their own (B = $PERMITS), the noisy tenant in shop" ;;
        alone) echo "alone: the quiet tenants with their keys, no noisy tenant (baseline)" ;;
    esac
}
bench_header "Tenants: one noisy tenant ($NOISY_CLIENTS clients) beside $QUIET quiet tenants (1 client each) in one workload, B = $PERMITS, $TENANT_BUILTIN ($SECS s runs, $ROUNDS alternating rounds)"
bench_settings
echo
echo "Command: \`$([ "$TENANT_BUILTIN" = tpcb-like ] || echo "TENANT_BUILTIN=$TENANT_BUILTIN ")bash test/bench/tenants.sh $SECS $ROUNDS $PERMITS\`. Clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown);" \
     "load average (1, 5, 15 min) $load_start at the start, $load_end at the end" \
     "(the machine is shared: a load well above 2 at the start means other work ran beside the benchmark)."
echo "Every tenant runs \`pgbench -M simple -b $TENANT_BUILTIN\` (scale 1) as the role app, whose \`bulkhead.workload = 'shop'\` (transparent admission: a permit per transaction; in the silo series the quiet tenants run as the role quietapp, whose workload is quiet)," \
     "and names itself at connection start with \`PGOPTIONS='-c bulkhead.key=NAME'\` (not in the fifo series): the noisy tenant one pgbench of $NOISY_CLIENTS clients (\`-j 2\`), each quiet tenant a pgbench of 1 client at most $QUIET_RATE TPS (\`-R\`; 0: no limit); all on CPU 1." \
     "The noisy clients connect first, the quiet tenants start once all are in. Queue of 1000, queue_timeout 60 s: nothing is refused."
echo "The quiet tenants' TPS and p99 come from their pgbench runs; the noisy tenant's TPS is counted over the quiet tenants' window: the workload's grants (\`bulkhead_stats.acquired\`) less the quiet tenants' transactions, per second."
echo "**The throughput that is left** for the noisy tenant in a series: the fifo series' total TPS (noisy and quiet in one queue: what the workload serves under this load)" \
     "less the quiet tenants' TPS in that series. Keys should give the quiet tenants what they ask for and leave the noisy tenant the rest."
echo
echo "| series | noisy TPS | quiet TPS (8 tenants) | total TPS | left for noisy | noisy / left | quiet p99 ms, worst tenant | failed | keys in use half-way (running/queued) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
for s in "${SERIES[@]}"; do
    if [ "$s" = alone ] || [ "$s" = silo ]; then l=- nl=-
    else
        l=$(left "$s") nl=$(bench_ratio "${NOISY[$s]}" "$l")
        [ "$l" -gt 0 ] || { l="none ($l)" nl=-; }
    fi
    echo "| $(describe "$s") | ${NOISY[$s]} | ${QUIET_TPS[$s]} | ${total[$s]} | $l | $nl | ${worst[$s]} | ${FAILS[$s]} | ${KEYS_SEEN[$s]} |"
done
echo
echo "Throughputs are the medians of the rounds. Each quiet tenant's p99 (ms) is over all its transactions of the $ROUNDS rounds ($(if bench_quick; then echo "$((QUIET_XACTS * ROUNDS)) in this smoke run"; else echo "about $((SECS * QUIET_RATE * ROUNDS)) at $QUIET_RATE TPS"; fi)), and against its p99 with the noisy tenant absent:"
echo
quiet_table pooled_cell
echo
echo "The spread: each quiet tenant's p99 (ms) in each round on its own, lowest–highest of the rounds:"
echo
quiet_table spread_cell
echo
echo "bulkhead_stats of the workload over all the runs: $stats."
echo
# ratio_worst SERIES: the highest of the quiet tenants' p99 ratios to
# alone's; ratio_range SERIES BASE: "lowest–highest×" of their ratios to BASE's
ratio_worst() {
    local i r w=0
    for ((i = 1; i <= QUIET; i++)); do
        r=$(bench_ratio "${QP99[$1/$i]}" "${QP99[alone/$i]}")
        bench_at_least "$w" "$r" || w=$r
    done
    echo "$w"
}
ratio_range() {
    local i
    echo "$(for ((i = 1; i <= QUIET; i++)); do bench_ratio "${QP99[$1/$i]}" "${QP99[$2/$i]}"; echo; done | lo_hi)×"
}
r=$(ratio_worst keys)
bench_at_least 1.5 "$r" && met=0 || met=1
bench_target "with keys, each quiet tenant's p99 ≤ 1.5× its p99 with the noisy tenant absent (at worst ${r}×; worst tenant ${worst[keys]} ms against ${worst[alone]} ms alone)" "$met"
l=$(left keys)
if [ "$l" -gt 0 ]; then
    r=$(bench_ratio "${NOISY[keys]}" "$l")
    bench_at_least "$r" 0.9 && met=0 || met=1
    bench_target "with keys, the noisy tenant ≥ 0.9× the throughput that is left (${NOISY[keys]} TPS against ${total[fifo]} − ${QUIET_TPS[keys]} = $l, ${r}×)" "$met"
else
    # met, but only because nothing is left: the share line below says more
    bench_target "with keys, the noisy tenant ≥ 0.9× the throughput that is left: nothing is left (${total[fifo]} − ${QUIET_TPS[keys]} = $l: the quiet tenants take more than the fifo series' total), so met whatever it gets (${NOISY[keys]} TPS)" 0
fi
# All the quiet tenants together: they run one script at one rate, so
# their transactions pooled give the quiet tenants' p99 from QUIET times
# the transactions of one.  And the measurement's resolution: the baseline
# against itself, its first rounds against the last ones, per tenant and
# pooled (what a ratio of two p99s is worth on this machine).
# pooled SERIES [FIRST LAST]: the p99 of all the quiet tenants in rounds
# FIRST to LAST (default all); pooled_ratio: the same against alone's
pooled() { latencies "$1" 0 "${2:-1}" "${3:-$ROUNDS}" | bench_p99; }
pooled_ratio() { bench_ratio "$(pooled "$@")" "$(pooled alone "${@:2}")"; }
# self_ratio TENANT (0: all): alone's p99 in the last rounds against the first
self_ratio() { bench_ratio "$(latencies alone "$1" $((h + 1)) "$ROUNDS" | bench_p99)" "$(latencies alone "$1" 1 "$h" | bench_p99)"; }
h=$((ROUNDS / 2)) halves=""
[ "$h" -eq 0 ] || halves="; rounds 1–$h $(pooled_ratio keys 1 "$h")×, rounds $((h + 1))–$ROUNDS $(pooled_ratio keys $((h + 1)) "$ROUNDS")×"
echo "- all $QUIET quiet tenants pooled (their transactions of all the rounds together): p99 $(pooled keys) ms with keys against $(pooled alone) ms alone ($(pooled_ratio keys)×$halves);" \
     "with the cap $(pooled_ratio cap)×, silo $(pooled_ratio silo)×, fifo $(pooled_ratio fifo)×"
if [ "$h" -gt 0 ]; then
    echo "- the measurement's resolution: the quiet tenants alone against themselves (rounds $((h + 1))–$ROUNDS against rounds 1–$h, the same conditions twice):" \
         "each tenant's p99 $(for ((i = 1; i <= QUIET; i++)); do self_ratio "$i"; echo; done | lo_hi)×, all of them pooled $(self_ratio 0)×"
fi
echo "- the floor: with a workload of their own (silo), never waiting for a permit of the noisy tenant's but beside it on the same CPUs," \
     "the quiet tenants' p99 is $(ratio_range silo alone) their p99 alone; with keys it is $(ratio_range keys silo) their p99 in the silo series" \
     "(what sharing one workload's permits costs them, over what sharing the machine costs)"
echo "- without keys (fifo), the quiet tenants' p99 is at worst $(ratio_worst fifo)× alone's (worst tenant ${worst[fifo]} ms); they get ${QUIET_TPS[fifo]} TPS against ${QUIET_TPS[alone]} alone"
echo "- with keys, the quiet tenants get ${QUIET_TPS[keys]} TPS ($(bench_ratio "${QUIET_TPS[keys]}" "${QUIET_TPS[alone]}")× alone's); the total is $(bench_ratio "${total[keys]}" "${total[fifo]}")× fifo's"
echo "- with max_running_per_key = 1, the quiet tenants' p99 is at worst $(ratio_worst cap)× alone's (worst tenant ${worst[cap]} ms), they get ${QUIET_TPS[cap]} TPS;" \
     "the noisy tenant, held to one permit of $PERMITS, gets ${NOISY[cap]} TPS ($(bench_ratio "${NOISY[cap]}" "${NOISY[keys]}")× with keys uncapped); the total is $(bench_ratio "${total[cap]}" "${total[fifo]}")× fifo's"
share() { awk -v n="${NOISY[$1]}" -v t="${total[$1]}" 'BEGIN { printf "%.1f", (t > 0 ? 100 * n / t : 0) }'; }
fair=$(awk -v n="$QUIET" 'BEGIN { printf "%.1f", 100 / (n + 1) }')
below=""
bench_at_least "$(share keys)" "$(awk -v f="$fair" 'BEGIN { print 0.9 * f }')" || below="**below its share as one key of $((QUIET + 1))**: "
echo "- ${below}the noisy tenant's share of the workload's transactions is $(share keys)% with keys ($(share fifo)% without keys, $(share cap)% with the cap);" \
     "with $((QUIET + 1)) keys of equal weight served least served first, it would get at least 1/$((QUIET + 1)) of the permit-time ($fair%) while it waits" \
     "(more while a quiet tenant is between two transactions)"
failed=0
for s in "${SERIES[@]}"; do failed=$((failed + FAILS[$s])); done
bench_target "no failed transaction ($failed failed)" "$([ "$failed" = 0 ] && echo 0 || echo 1)"
