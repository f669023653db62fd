# test/bench/adaptive.gp: the shift plot of adaptive.sh.  Data files
# dir/adaptive-shift-SERIES.dat: seconds, TPS (over 100 ms), current_limit.
#   gnuplot -e "dir='...'; out='x.png'; law='holders'; fixed_n='fixed-64'; fixed_t='fixed-3'; phase=30" adaptive.gp
set terminal pngcairo size 1000,640 font "DejaVu Sans,11"
set output out
set multiplot layout 2,1 title "Shift: simple-update, tpcb-like, simple-update (" . phase . " s each), 128 clients, sampled every 100 ms"
set grid
set key below maxcols 3
set xrange [0:3 * phase]
set arrow from phase, graph 0 to phase, graph 1 nohead dt 2
set arrow from 2 * phase, graph 0 to 2 * phase, graph 1 nohead dt 2
set ylabel "TPS (1 s moving mean)"
set yrange [0:*]
f(s) = dir . "/adaptive-shift-" . s . ".dat"
# a 1 s moving mean of the 100 ms TPS samples, for legibility
samples(x) = $0 > 9 ? 10 : $0 + 1
avg10(x) = (shift10(x), (b1 + b2 + b3 + b4 + b5 + b6 + b7 + b8 + b9 + b10) / samples($0))
shift10(x) = (b10 = b9, b9 = b8, b8 = b7, b7 = b6, b6 = b5, b5 = b4, b4 = b3, b3 = b2, b2 = b1, b1 = x)
init(x) = (b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = b9 = b10 = 0)
plot sum = init(0), f(law) using 1:(avg10($2)) with lines lw 2 lc rgb "#006400" title "adaptive (" . law . ")", \
     sum = init(0), f(fixed_n) using 1:(avg10($2)) with lines lw 1.5 lc rgb "#1f77b4" title fixed_n, \
     sum = init(0), f(fixed_t) using 1:(avg10($2)) with lines lw 1.5 lc rgb "#d62728" title fixed_t
set ylabel "current\\_limit"
set logscale y 2
set yrange [0.8:160]
set xlabel "seconds"
plot f(law) using 1:3 with steps lw 2 lc rgb "#006400" title "adaptive (" . law . ")", \
     f(fixed_n) using 1:3 with steps lw 1.5 lc rgb "#1f77b4" title fixed_n, \
     f(fixed_t) using 1:3 with steps lw 1.5 lc rgb "#d62728" title fixed_t
unset multiplot
