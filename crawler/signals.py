"""Signals of our own."""

# the crawl's archive (CrawlArchive) read the archive it writes to, before the first request:
# ``committed`` the run ids of the manifests it trusts, ``present`` those of every
# manifest the archive holds. The archive is the truth: state kept outside it (the
# validators of conditional requests, a job's seen-set, a frontier's claims) is a cache
# checked against these, and dropped where they no longer hold what it was built on.
# ``warc``: its WARC writer (None with --no-warc), whose process hosts the verifier;
# ``writer``: the archive writer, whose held versions a scheduled re-crawl asks again by.
archive_opened = object()
# the crawl's archive (CrawlArchive) committed the final manifest, whose run id is ``run_id``
archive_committed = object()
# the frontier hands out tasks of a worker that died: the archive must first learn what
# that worker's interim commits committed
frontier_recovered = object()
# a line the person running the crawl must read now (``line``): the command line prints it
operator_notice = object()
# a fetched bundle was rejected (``url``): its validators must not be kept, so that the
# next crawl fetches it again (after a key is pinned, or an upgrade) instead of a 304
bundle_rejected = object()
# a bundle fetched from ``url`` was archived in the run whose run id is ``run_id``:
# it is committed when that run is
bundle_archived = object()
# an interim commit committed the run whose run id is ``run_id``; the crawl goes on
interim_committed = object()
# the archive refused a verified copy fetched from ``url`` as its record's current version:
# ``relation`` says why, "stale" (older than the version it holds) or "forked" (from it)
version_refused = object()
# the crawl started a record's work (``suffix``): it must end accounted for (crawler.extensions.record_ledger)
record_opened = object()
# a record ended with no item to say how (``suffix``, ``outcome``: "unchanged", "forbidden")
record_settled = object()
# a source bundles are fetched from (``base``) joined the crawl, at its start or from the registry's list
source_added = object()
# the robots.txt of a source (``base``) was asked for: requests to it wait until it answers
robots_awaited = object()
# the robots.txt of a source (``base``) answered (``fetched`` True), or did not within its deadline
robots_answered = object()
# a source's listed dates were found lying (``base``): from now on every record it lists is asked
# again, and the listings read so far are read again (crawler.scheduling.freshness)
dates_distrusted = object()
