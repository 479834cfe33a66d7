"""DescribeGroups / ListGroups / DeleteGroups rules."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .conftest import Harness, settle


async def test_describe_stable_group_shows_members_and_assignments(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    (desc,) = await harness.coord.describe_groups(["g"])
    assert desc.error_code == ErrorCode.none
    assert (desc.state, desc.protocol_type, desc.protocol) == ("Stable", "consumer", "range")
    by_id = {m.member_id: m for m in desc.members}
    assert by_id[b.member_id].assignment == b.member_id.encode()
    assert by_id[b.member_id].metadata == b"meta"
    assert by_id[b.member_id].client_host == "/127.0.0.1"


async def test_describe_unknown_group_is_dead_without_error(harness: Harness) -> None:
    (desc,) = await harness.coord.describe_groups(["nope"])
    assert (desc.error_code, desc.state, desc.members) == (0, "Dead", [])


async def test_describe_rebalancing_group_hides_protocol_and_assignments(harness: Harness) -> None:
    await harness.form_group(2)
    harness.join()
    await settle()
    (desc,) = await harness.coord.describe_groups(["g"])
    assert desc.state == "PreparingRebalance"
    assert desc.protocol == ""
    assert all(m.assignment == b"" for m in desc.members)


async def test_list_groups_includes_groups_with_only_committed_offsets(harness: Harness) -> None:
    await harness.form_group(1, group="live")
    harness.store.commit_offsets("offsets-only", [])  # nothing stored: not listed
    await harness.commit("", -1, [("t", 0, 1, -1, None)], group="standalone")
    listed = await harness.coord.list_groups()
    assert ("live", "consumer", "Stable") in listed
    assert ("standalone", "", "Empty") in listed
    assert all(g.group_id != "offsets-only" for g in listed)
    only_empty = await harness.coord.list_groups(["empty"])
    assert [g.group_id for g in only_empty] == ["standalone"]


async def test_list_groups_shows_offsets_from_the_store_after_restart(harness: Harness) -> None:
    from ingest.metadata.api import CommittedOffset

    harness.store.commit_offsets("old", [CommittedOffset("t", 0, 1, -1, None, 0)])
    assert ("old", "", "Empty") in await harness.coord.list_groups()
    (desc,) = await harness.coord.describe_groups(["old"])
    assert desc.state == "Empty"


async def test_delete_group_with_members_is_refused(harness: Harness) -> None:
    await harness.form_group(1)
    assert await harness.coord.delete_groups(["g"]) == {"g": ErrorCode.non_empty_group}


async def test_delete_unknown_group_is_not_found(harness: Harness) -> None:
    assert await harness.coord.delete_groups(["nope"]) == {"nope": ErrorCode.group_id_not_found}


async def test_delete_empty_group_removes_its_offsets(harness: Harness) -> None:
    a, _ = await harness.form_group(2)
    await harness.commit(a.member_id, a.generation_id, [("t", 0, 9, -1, None)])
    await harness.coord.leave_group(group_id="g", members=[(m.member_id, None) for m in (a, _)])
    assert await harness.coord.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert harness.store.fetch_offsets("g") == []
    assert all(g.group_id != "g" for g in await harness.coord.list_groups())
    assert await harness.coord.delete_groups(["g"]) == {"g": ErrorCode.group_id_not_found}
    fetched = await harness.coord.fetch_offsets(group_id="g", partitions=[("t", 0)])
    assert fetched.partitions[0].offset == -1


async def test_delete_offsets_only_group(harness: Harness) -> None:
    await harness.commit("", -1, [("t", 0, 1, -1, None)], group="solo")
    assert await harness.coord.delete_groups(["solo", "nope"]) == {
        "solo": ErrorCode.none,
        "nope": ErrorCode.group_id_not_found,
    }
    assert harness.store.list_offset_groups() == []
