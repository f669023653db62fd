# 610_explain_option.pl: EXPLAIN (ANALYZE, BULKHEAD) (1.5, PostgreSQL 18
# and later; skipped before 18, where EXPLAIN has no options of extensions).
#
#  1. Text: after the plan, the statement's workload, its lane (none), its
#     memory requested and granted, its wait, not shrunk; the request equals
#     bulkhead_classify(query)'s memory_requested (in kB, rounded up).  Under
#     the Sort and under the Hash Join's Hash (not the Hash Join), a
#     "Bulkhead Memory:" line: kind, limit (work_mem, hash_mem_multiplier
#     times it), request and its source, grant; the nodes' requests add up
#     to the statement's; each one's peak is EXPLAIN's own figure of it.
#  2. While it runs, bulkhead_activity shows the same request and grant.
#  3. A workload whose max_memory is below the request: granted its limit,
#     shrunk, each node's grant below its request, both spilled;
#     bulkhead_stats counts the statement shrunk once.
#  4. A statement rule's lane: "Lane: rule N" and the lane's workload, as
#     bulkhead_classify(query) answers.
#  5. JSON (and XML): the same figures as properties, in the plan's nodes
#     and in a "Bulkhead" object beside "Execution Time".
#  6. Without ANALYZE, or with BULKHEAD off: nothing.  A value that is not
#     a boolean: EXPLAIN's usual error.
#
# Figures are compared with each other, not with bytes that vary by version.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use POSIX qw(ceil);
use Test::More;

my ($major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
plan skip_all => 'EXPLAIN options of extensions need PostgreSQL 18 or later'
  if !defined $major || $major < 18;

my $node = bulkhead_node('explain_option',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('reports', 4, 4, '30s', '64MB', '30s'),
	       ('tight', 4, 4, '30s', '512kB', '0'),
	       ('heavy', 4, 4, '30s', '64MB', '30s');
	INSERT INTO bulkhead_rule (position, workload, min_cost) VALUES (10, 'heavy', 1e9);
	CREATE FUNCTION costly() RETURNS int LANGUAGE plpgsql COST 100000000
	AS $$ BEGIN RETURN 1; END $$;
	CREATE TABLE t AS SELECT g AS a, md5(g::text) AS b FROM generate_series(1, 20000) g;
	CREATE TABLE u AS SELECT g AS a FROM generate_series(1, 5000) g;
	ANALYZE t;
	ANALYZE u;
	CREATE ROLE r LOGIN;
	CREATE ROLE r2 LOGIN;
	GRANT SELECT ON t, u TO r, r2;
	ALTER ROLE r SET bulkhead.workload = 'reports';
	ALTER ROLE r2 SET bulkhead.workload = 'tight';
});
wait_loaded($node, 'heavy', 4);

my $q = 'SELECT * FROM t JOIN u USING (a) ORDER BY b';
my $opts = 'ANALYZE, BULKHEAD, COSTS OFF, TIMING OFF, BUFFERS OFF';

# EXPLAIN ($opts[, $more]) $query as $role
sub run_explain
{
	my ($role, $query, $more) = @_;
	my $o = defined $more ? "$opts, $more" : $opts;
	return $node->safe_psql('postgres', "EXPLAIN ($o) $query",
		extra_params => [ '-U', $role ]);
}

# bulkhead_classify($query)'s memory_requested as $role, in kB rounded up
sub classified_kb
{
	my ($role, $query) = @_;
	my $row = $node->safe_psql('postgres',
		"SELECT workload || '/' || source || '/' || coalesce(rule_position::text, '-')"
		  . " || '/' || memory_requested || '/' || memory_source"
		  . " FROM bulkhead_classify('$query')",
		extra_params => [ '-U', $role ]);
	my ($w, $src, $pos, $bytes, $msrc) = split m{/}, $row;
	return ("$w/$src/$pos", ceil($bytes / 1024), $msrc);
}

# The statement's block: hashref of its figures
sub statement_block
{
	my ($out) = @_;
	my %b;
	return undef unless $out =~ /^Bulkhead:\n((?:  .*\n?)+)/m;
	my $block = $1;
	$b{$1} = $2 while $block =~ /^\s+([A-Za-z ]+): (.*)$/mg;
	return \%b;
}

# The node lines: kind => { limit, request, source, grant }
sub node_lines
{
	my ($out) = @_;
	my %n;
	while ($out =~
		/Bulkhead Memory: (\w[\w ]*?)  Limit: (\d+)kB  Request: (\d+)kB \((estimate|feedback|limit)\)  Grant: (\d+)kB(.*)$/mg)
	{
		$n{$1} = { limit => $2, request => $3, source => $4, grant => $5, rest => $6 };
	}
	return \%n;
}

# 1. text
my $out = run_explain('r', $q);
note $out;
my $st = statement_block($out);
ok($st, 'a Bulkhead block after the plan');
is($st->{Workload}, 'reports', 'its workload');
is($st->{Lane}, 'none', 'no statement rule sent it');
like($st->{'Memory Requested'}, qr/^\d+ kB$/, 'its request, in kB');
like($st->{'Memory Wait'}, qr/^\d+\.\d{3} ms$/, 'its wait, in ms');
is($st->{'Memory Shrunk'}, 'false', 'not shrunk');
my ($req) = $st->{'Memory Requested'} =~ /^(\d+)/;
my ($granted) = ($st->{'Memory Granted'} // '') =~ /^(\d+)/;
cmp_ok($req, '>', 0, 'a request');
is($granted, $req, 'granted what it asked');
my ($class, $class_kb, $class_src) = classified_kb('r', $q);
is($class, 'reports/setting/-', 'bulkhead_classify: the same workload');
is($req, $class_kb, "the request is bulkhead_classify's memory_requested");

like($out, qr/^Sort .*\n(?:[ ]*+(?!->).*\n)*?\s+Bulkhead Memory: sort /m,
	'the Sort has its line');
like($out, qr/->  Hash \(.*\n(?:[ ]*+(?!->).*\n)*?\s+Bulkhead Memory: hash /m,
	'the hash join\'s table is shown under its Hash');
unlike($out, qr/->  Hash Join \(.*\n(?:[ ]*+(?!->).*\n)*?\s+Bulkhead Memory:/m,
	'and not under the Hash Join');
my $nodes = node_lines($out);
is_deeply([ sort keys %$nodes ], [ 'hash', 'sort' ], 'two memory nodes');
is($nodes->{sort}{limit}, 1024, "the Sort's limit is work_mem");
is($nodes->{hash}{limit}, 2048, "the Hash's is hash_mem_multiplier times it");
for my $k (sort keys %$nodes)
{
	my $n = $nodes->{$k};
	cmp_ok($n->{request}, '<=', $n->{limit}, "$k: request within its limit");
	is($n->{grant}, $n->{request}, "$k: granted its request");
	like($n->{rest}, qr/^(?:  Peak: \d+kB)?(?:  Spilled: true)?$/, "$k: peak, spill");
	is($n->{source}, $class_src, "$k: its source is bulkhead_classify's memory_source");
}
is($nodes->{sort}{request} + $nodes->{hash}{request}, $req,
	"the nodes' requests add up to the statement's");
# what each used (nodepeak.c) is what EXPLAIN's own lines say
my ($sort_mem) = $out =~ /Sort Method: quicksort  Memory: (\d+)kB/;
my ($hash_mem) = $out =~ /Batches: 1  Memory Usage: (\d+)kB/;
is($nodes->{sort}{rest}, "  Peak: ${sort_mem}kB", "the Sort's peak is its Memory, not spilled");
is($nodes->{hash}{rest}, "  Peak: ${hash_mem}kB", "the Hash's peak is its Memory Usage, not spilled");

# 2. bulkhead_activity while it runs
my $slow = 'SELECT * FROM t JOIN u USING (a) WHERE (SELECT pg_sleep(3)) IS NOT NULL ORDER BY b';
my $s = session($node, 'postgres', 'r');
my $pid = sql($s, 'SELECT pg_backend_pid()');
send_async($s, "EXPLAIN ($opts) $slow;");
ok( poll_until($node,
		"SELECT memory_granted > 0 FROM bulkhead_activity WHERE pid = $pid"),
	'the running statement has its grant');
my $act = $node->safe_psql('postgres',
	"SELECT workload || ' ' || memory_requested || ' ' || memory_granted"
	  . " FROM bulkhead_activity WHERE pid = $pid");
my ($out2, $err2) = finish_async($s);
is($err2, '', 'the slow EXPLAIN ran');
my $st2 = statement_block($out2) // {};
my ($aw, $areq, $agr) = split / /, $act;
is($st2->{Workload}, $aw, 'bulkhead_activity: the same workload');
is($st2->{'Memory Requested'}, ceil($areq / 1024) . ' kB', 'the same request');
is($st2->{'Memory Granted'}, ceil($agr / 1024) . ' kB', 'the same grant');
close_session($s);

# 3. shrunk to a workload's max_memory
my $shrunk_before = $node->safe_psql('postgres',
	"SELECT memory_shrunk FROM bulkhead_stats WHERE workload = 'tight'");
$out = run_explain('r2', $q);
note $out;
my $shrunk_after = $node->safe_psql('postgres',
	"SELECT memory_shrunk FROM bulkhead_stats WHERE workload = 'tight'");
$st = statement_block($out);
is($st->{Workload}, 'tight', 'in the tight workload');
is($st->{'Memory Shrunk'}, 'true', 'shrunk');
is($st->{'Memory Requested'}, "$req kB", 'it asked as much');
is($st->{'Memory Granted'}, '512 kB', "granted its workload's max_memory");
is($shrunk_after - $shrunk_before, 1, 'bulkhead_stats counts it shrunk once');
$nodes = node_lines($out);
cmp_ok($nodes->{$_}{grant}, '<', $nodes->{$_}{request}, "$_: granted less")
  for qw(sort hash);
like($out, qr/Sort Method: external merge/, 'the Sort went to disk');
like($nodes->{$_}{rest}, qr/^  Peak: \d+kB  Spilled: true$/, "$_: spilled, held to its grant")
  for qw(sort hash);

# 4. a statement rule's lane
my $qc = 'SELECT * FROM t JOIN u USING (a) WHERE costly() = 1 ORDER BY b';
$out = run_explain('r', $qc);
note $out;
$st = statement_block($out);
is($st->{Workload}, 'heavy', "the lane's workload");
is($st->{Lane}, 'rule 10', 'sent there by the statement rule at position 10');
($class, $class_kb) = classified_kb('r', $qc);
is($class, 'heavy/rule/10', 'as bulkhead_classify answers');
is($st->{'Memory Requested'}, "$class_kb kB", 'with its request');

# 5. JSON and XML
my $json = run_explain('r', $q, 'FORMAT JSON');
my $doc = eval { decode_json($json) };
ok($doc, 'the JSON parses');
my $top = $doc->[0];
my $bh = $top->{Bulkhead} // {};
is($bh->{Workload}, 'reports', 'JSON: Workload');
is($bh->{Lane}, 'none', 'JSON: Lane');
is($bh->{'Memory Requested'}, $req, 'JSON: Memory Requested (kB)');
is($bh->{'Memory Granted'}, $req, 'JSON: Memory Granted (kB)');
ok(JSON::PP::is_bool($bh->{'Memory Shrunk'}) && !$bh->{'Memory Shrunk'},
	'JSON: Memory Shrunk false');
like($bh->{'Memory Wait'}, qr/^\d+(?:\.\d+)?$/, 'JSON: Memory Wait, a number');
my $sort = $top->{Plan};
my $hj = $sort->{Plans}[0];
my ($hash) = grep { $_->{'Node Type'} eq 'Hash' } @{ $hj->{Plans} };
is($sort->{'Node Type'}, 'Sort', 'JSON: the Sort on top');
is($sort->{'Bulkhead Memory'}{Kind}, 'sort', 'JSON: its memory node');
is($sort->{'Bulkhead Memory'}{Limit}, 1024, 'JSON: its Limit (kB)');
is($sort->{'Bulkhead Memory'}{'Request Source'}, 'estimate', 'JSON: its Request Source');
ok(JSON::PP::is_bool($sort->{'Bulkhead Memory'}{Spilled}), 'JSON: Spilled, a boolean');
is($sort->{'Bulkhead Memory'}{Peak}, $sort->{'Sort Space Used'}, 'JSON: its Peak is its Sort Space Used');
ok(!exists $hj->{'Bulkhead Memory'}, 'JSON: nothing under the Hash Join');
is($hash->{'Bulkhead Memory'}{Kind}, 'hash', 'JSON: the table under the Hash');
is( $sort->{'Bulkhead Memory'}{Request} + $hash->{'Bulkhead Memory'}{Request},
	$req, "JSON: the nodes' requests add up");
my $xml = run_explain('r', $q, 'FORMAT XML');
like($xml, qr{<Bulkhead>\s*<Workload>reports</Workload>\s*<Lane>none</Lane>\s*<Memory-Requested>$req</Memory-Requested>}s,
	'XML: the statement\'s figures');
like($xml, qr{<Bulkhead-Memory>\s*<Kind>sort</Kind>}s, 'XML: the Sort\'s');

# 6. nothing without ANALYZE or when off; a non-boolean value is an error
$out = $node->safe_psql('postgres', "EXPLAIN (BULKHEAD, COSTS OFF) $q",
	extra_params => [ '-U', 'r' ]);
unlike($out, qr/Bulkhead/, 'without ANALYZE: nothing');
$out = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, BULKHEAD off) $q",
	extra_params => [ '-U', 'r' ]);
unlike($out, qr/Bulkhead/, 'BULKHEAD off: nothing');
$out = $node->safe_psql('postgres', "EXPLAIN (ANALYZE, BULKHEAD 'on') $q",
	extra_params => [ '-U', 'r' ]);
like($out, qr/^Bulkhead:$/m, "BULKHEAD 'on': as true");
my ($rc, $stdout, $stderr) =
  $node->psql('postgres', "EXPLAIN (ANALYZE, BULKHEAD maybe) SELECT 1");
like($stderr, qr/ERROR:  bulkhead requires a Boolean value/, 'BULKHEAD maybe: an error');
($rc, $stdout, $stderr) =
  $node->psql('postgres', "EXPLAIN (ANALYZE, BULKHEAD 2) SELECT 1");
like($stderr, qr/ERROR:  bulkhead requires a Boolean value/, 'BULKHEAD 2: an error');

$node->stop;
done_testing();
