# test/bench/plot.gp: the overload plots, from a data file of overload.sh.
#   gnuplot -e "data='overload-scale1.dat'; out='overload-scale1'; what='tpcb-like, scale 1'" plot.gp
# writes out-tps.png and out-p99.png.  Columns: clients, then TPS and p99
# (ms) for ungated, DIY semaphore, PgBouncer, bulkhead, bulkhead.workload.
set terminal pngcairo size 900,560 font "DejaVu Sans,11"
set datafile commentschars "#"
set logscale x 2
set xlabel "pgbench clients"
set key below maxcols 3 height 1
set grid
set style data linespoints
array names[5] = ["ungated", "DIY semaphore (advisory locks)", "PgBouncer (transaction pool)", "bulkhead (bulkhead\\_acquire\\_xact)", "bulkhead (bulkhead.workload)"]
array colours[5] = ["#999999", "#d62728", "#1f77b4", "#2ca02c", "#006400"]

set output out . "-tps.png"
set title "Throughput under overload: " . what
set ylabel "transactions per second (median)"
set yrange [0:*]
plot for [i=1:5] data using 1:(column(2 * i)) title names[i] lw 2 pt 7 lc rgb colours[i]

set output out . "-p99.png"
set title "99th percentile latency under overload: " . what
set ylabel "p99 latency, ms (log scale)"
set logscale y 10
set yrange [*:*]
plot for [i=1:5] data using 1:(column(2 * i + 1)) title names[i] lw 2 pt 7 lc rgb colours[i]
