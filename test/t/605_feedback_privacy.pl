# 605_feedback_privacy.pl: grant feedback's columns of bulkhead_statements
# (1.5) follow pg_stat_statements' rule.  Two plain roles run statements in
# workload w; each sees peak_used, spills, memory_request and memory_source
# of its own statements only (NULL on the other's rows), and
# bulkhead_statement_memory() shows it only its own; a member of
# pg_read_all_stats, and a superuser, see all.  The reset is not for
# plain roles.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_privacy');
$node->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	CREATE ROLE carol LOGIN IN ROLE pg_read_all_stats;
	CREATE TABLE priv_t (id int, v text);
	INSERT INTO priv_t SELECT i, md5(i::text) FROM generate_series(1, 20000) i;
	ANALYZE priv_t;
	GRANT SELECT ON priv_t TO alice, bob;
});
my $qa = 'SELECT * FROM priv_t ORDER BY v';
my $qb = 'SELECT * FROM priv_t ORDER BY id DESC';
my ($ida, $idb) = (query_id($node, $qa), query_id($node, $qb));
run_in($node, $qa, role => 'alice');
run_in($node, $qb, role => 'bob');

# what $role sees of statement $id: "calls|peak shown|source"
sub seen
{
	my ($role, $id) = @_;
	return $node->safe_psql('postgres',
		"SET ROLE $role; SELECT coalesce(sum(calls), 0) || '|' || bool_or(peak_used IS NOT NULL)"
		  . " || '|' || coalesce(max(memory_source), '-')"
		  . " FROM bulkhead_statements WHERE queryid = $id AND workload = 'w'");
}
sub direct
{
	my ($role, $id) = @_;
	return $node->safe_psql('postgres',
		"SET ROLE $role; SELECT count(*) FROM bulkhead_statement_memory() WHERE queryid = $id");
}

like(seen('alice', $ida), qr/\|true\|estimate$|\|true\|feedback$/, 'alice sees her statement\'s memory columns');
is(direct('alice', $ida), 1, 'and its notes');
unlike(seen('alice', $idb), qr/\|true\|/, 'alice does not see bob\'s statement\'s memory columns');
is(direct('alice', $idb), 0, 'nor its notes');
unlike(seen('bob', $ida), qr/\|true\|/, 'bob does not see alice\'s');
is(direct('bob', $idb), 1, 'bob sees his own notes');
is(direct('carol', $ida) + direct('carol', $idb), 2, 'a member of pg_read_all_stats sees both');
is(direct('postgres', $ida) + direct('postgres', $idb), 2, 'a superuser sees both');
my ($rc, $out, $err) = $node->psql('postgres',
	'SET ROLE alice; SELECT bulkhead_statement_memory_reset()');
like($err, qr/permission denied/, 'a plain role may not reset the notes');

$node->stop;
done_testing();
