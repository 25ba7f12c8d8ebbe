"""The nginx the tests serve static sites with answers as users' servers do."""

import time
import urllib.request


def test_nginx_serves_a_folder_with_validators_and_logs_each_request(nginx, tmp_path):
    root, log = tmp_path / "site", tmp_path / "access.log"
    url = nginx(root, access_log=log)
    (root / "pith").mkdir(parents=True)
    (root / "pith" / "bundle.json").write_bytes(b'{"a": 1}')  # written after the server started
    with urllib.request.urlopen(url + "/pith/bundle.json", timeout=10) as response:
        assert response.read() == b'{"a": 1}'
        assert response.headers["ETag"] and response.headers["Last-Modified"]
    request = urllib.request.Request(url + "/pith/bundle.json", headers={"If-None-Match": response.headers["ETag"]})
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("a matching ETag must be answered 304")
    except urllib.error.HTTPError as answered:
        assert answered.code == 304
    deadline = time.monotonic() + 10  # nginx logs a request once its answer is sent: a moment after the client has it
    while len(log.read_text().splitlines()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.read_text().splitlines() == ["GET /pith/bundle.json 200", "GET /pith/bundle.json 304"]
