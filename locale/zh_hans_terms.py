"""Fill the zh_Hans catalogue from this glossary: ``python locale/zh_hans_terms.py`` after ``makemessages``.

Kept beside the catalogue so that a string wrapped later gets the same words for the same ideas (导流商 for
partner, 对账 for reconcile). Entries it does not know are listed, to be added here or translated in the .po.
"""

import sys
from pathlib import Path

import polib

CATALOGUE = Path(__file__).parent / "zh_Hans" / "LC_MESSAGES" / "django.po"

TERMS = {
    "user type": "用户类型",
    "user id": "用户 ID",
    "month": "月份",
    "days logged in": "登录日",
    "Login activity": "登录活跃",
    "children": "下级导流商",
    "parent": "上级导流商",
    "statistics": "统计",
    "partner page": "导流商页面",
    "date range": "日期范围",
    "parent partner": "上级导流商",
    "reconciled": "已对账",
    "Yes, exact": "是（精确值）",
    "No, realtime": "否（实时值）",
    "date": "日期",
    "partner code": "导流商代码",
    "partner name": "导流商名称",
    "level": "层级",
    "own PV": "自身 PV",
    "own UV": "自身 UV",
    "bot PV": "机器人 PV",
    "reconciled at": "对账时间",
    "bucket start": "时段开始",
    "generation": "批次",
    "flushed at": "落库时间",
    "realtime PV": "实时 PV",
    "exact PV": "精确 PV",
    "realtime UV": "实时 UV",
    "exact UV": "精确 UV",
    "PV drift": "PV 偏差",
    "UV drift": "UV 偏差",
    "received at": "接收时间",
    "reason": "原因",
    "error": "错误",
    "source": "来源",
    "partition": "分区",
    "offset": "偏移量",
    "bytes": "字节数",
    "payload (start)": "消息内容（开头）",
    "payload": "消息内容",
    "CPS partner statistics": "CPS 导流商统计",
    "CPS statistics": "CPS 统计",
    "Statistics dashboard": "统计看板",
    "The date range was not understood (%(error)s); showing %(start)s to %(end)s instead.": (
        "无法识别日期范围（%(error)s），改为显示 %(start)s 至 %(end)s。"
    ),
    "Scope must be “tree” or “self”; showing the subtree.": "范围只能是“tree”或“self”，改为显示含下级的数据。",
    "No partner has the code %(code)s; showing all traffic.": "没有代码为 %(code)s 的导流商，改为显示全部流量。",
    "PV and UV per day": "每日 PV 与 UV",
    "PV": "PV",
    "UV": "UV",
    "PV per minute, last hour": "最近一小时每分钟 PV",
    "No partner has the code %(code)s.": "没有代码为 %(code)s 的导流商。",
    "Partner %(code)s: %(name)s": "导流商 %(code)s：%(name)s",
    "total": "合计",
    "Total": "合计",
    "Dashboard": "看板",
    "Language": "语言",
    "Switch": "切换",
    "Download CSV": "下载 CSV",
    "A user's login calendar (last 90 days)": "用户登录日历（最近 90 天）",
    "Look up": "查询",
    "%(days)s day(s)": "%(days)s 天",
    "no logins": "没有登录",
    "Daily active users, last 30 days": "最近 30 天日活跃用户",
    "Login activity &amp; DAU": "登录活跃与日活",
    "Statistics": "统计",
    "Total of the %(rows)s filtered row": "筛选出的 %(rows)s 行合计",
    "Distinct users cannot be added up across partners and days.": "去重用户数不能跨导流商或跨天相加。",
    "Partner": "导流商",
    "all traffic": "全部流量",
    "From": "从",
    "to": "至",
    "Scope": "范围",
    "with sub-partners": "含下级导流商",
    "own traffic only": "仅自身流量",
    "traffic without a partner": "无导流商的流量",
    "Show": "显示",
    "Partner page": "导流商页面",
    "All traffic": "全部流量",
    "PV today": "今日 PV",
    "UV today": "今日 UV",
    "PV %(start)s – %(end)s": "PV（%(start)s 至 %(end)s）",
    "UV over the range": "区间去重 UV",
    "Distinct users over the whole range, from the merged HyperLogLogs (±0.81%%)": (
        "整个区间的去重用户数，由合并的 HyperLogLog 估算（±0.81%%）"
    ),
    "As of %(moment)s: flushed numbers plus what Redis holds.": "截至 %(moment)s：已落库数据加上 Redis 中尚未落库的数据。",
    "Numbers per day": "每日数据",
    "Date": "日期",
    "Reconciled": "已对账",
    "Top partners, last %(window)s": "导流商排行（最近 %(window)s）",
    "No traffic in this window.": "该时间窗内没有流量。",
    "Pipeline health": "数据管道状态",
    "Pipeline status is not available in this installation.": "本安装中无法获取数据管道状态。",
    "Consumer lag per partition": "各分区消费延迟",
    "Partition": "分区",
    "Committed offset": "已提交偏移量",
    "End offset": "末尾偏移量",
    "Lag": "延迟",
    "No end offset recorded yet: consumers and the Kafka probe job record them.": (
        "尚未记录末尾偏移量：由消费者和 Kafka 探测任务记录。"
    ),
    "End offsets as seen at %(seen)s.": "末尾偏移量观测于 %(seen)s。",
    "Redis at %(url)s did not answer (%(error)s)": "Redis（%(url)s）没有响应（%(error)s）",
    "the database did not answer (%(error)s)": "数据库没有响应（%(error)s）",
    "statistics viewers": "统计查看者",
    "Staff need the permissions %(perms)s (the “statistics viewers” group holds them).": (
        "员工需要权限 %(perms)s（“统计查看者”组拥有这些权限）。"
    ),
    "Jobs": "任务",
    "Last flush": "最近落库",
    "Last reconcile": "最近对账",
    "Realtime against reconciled, last reconciled day": "实时与对账结果对比（最近对账日）",
    "Day": "日期",
    "No day has been reconciled yet.": "还没有对账过的日期。",
    "Dead letters today": "今日死信",
    "None.": "无。",
    "Some figures could not be read; the server log says why.": "部分数据无法读取，原因见服务器日志。",
    " By %(filter_title)s ": " 按%(filter_title)s ",
    "Filter": "筛选",
    "Clear": "清除",
    "Chart on the dashboard": "在看板中查看图表",
    "Edit partner": "编辑导流商",
    "PV adds up; UV of a range or of several partners is the union of the daily HyperLogLogs, never a sum (±0.81%%).": (
        "PV 可以相加；区间或多个导流商的 UV 是每日 HyperLogLog 的并集，而不是相加（±0.81%%）。"
    ),
    "Metrics need a staff login or the metrics token (Authorization: Bearer …).": (
        "查看指标需要工作人员登录或指标令牌（Authorization: Bearer …）。"
    ),
    "User logins": "用户登录",
    "first day of the month": "当月第一天",
    "synced at": "同步时间",
    "login month": "月度登录",
    "login months": "月度登录",
    "Partners": "导流商",
    "A code is letters, digits, '.', '_' or '-', starting with a letter or digit.": "代码由字母、数字、“.”、“_”或“-”组成，并以字母或数字开头。",
    "code": "代码",
    "name": "名称",
    "path": "路径",
    "active": "启用",
    "created at": "创建时间",
    "updated at": "更新时间",
    "partner": "导流商",
    "partners": "导流商",
    "A partner cannot be its own ancestor (that would be a cycle).": "导流商不能是自己的上级（那会形成环）。",
    "Partners are at most %(max)d levels deep; %(code)s is level %(level)d.": "导流商最多 %(max)d 级；%(code)s 已是第 %(level)d 级。",
    "user": "用户",
    "portal account": "门户账号",
    "portal accounts": "门户账号",
    "No such partner.": "没有这个导流商。",
    "Traffic statistics": "流量统计",
    "event id": "事件 ID",
    "type": "类型",
    "time": "时间",
    "day": "日期",
    "level 1 partner": "一级导流商",
    "level 2 partner": "二级导流商",
    "level 3 partner": "三级导流商",
    "openid": "openid",
    "bot": "机器人",
    "raw event": "原始事件",
    "raw events": "原始事件",
    "first day": "首日",
    "last day": "末日",
    "events": "事件数",
    "body": "压缩内容",
    "raw event chunk": "原始事件块",
    "raw event chunks": "原始事件块",
    "discarded at": "丢弃时间",
    "discarded event": "已丢弃事件",
    "discarded events": "已丢弃事件",
    "no value (a tombstone) or an empty one": "没有值（墓碑消息）或值为空",
    "payload over the size limit": "消息超过大小上限",
    "not UTF-8": "不是 UTF-8",
    "not JSON": "不是 JSON",
    "JSON but not an object": "是 JSON 但不是对象",
    "a required field is missing": "缺少必填字段",
    "unknown event type": "未知的事件类型",
    "a field has a bad value": "字段值无效",
    "unreadable timestamp": "无法识别的时间戳",
    "timestamp too far in the future": "时间戳太靠后（未来）",
    "timestamp older than the maximum lateness": "时间戳早于最大延迟",
    "unknown partner code": "未知的导流商代码",
    "inactive partner": "导流商已停用",
    "a storage layer refused the event": "存储层拒绝了该事件",
    "the parser failed": "解析器出错",
    "Kafka topic, or file:PATH for a replay": "Kafka 主题，或重放时的 file:路径",
    "raw bytes": "原始字节",
    "dead letter": "死信",
    "dead letters": "死信",
    "5-minute statistic": "5 分钟统计",
    "5-minute statistics": "5 分钟统计",
    "realtime own PV": "实时自身 PV",
    "realtime own UV": "实时自身 UV",
    "UV HyperLogLog": "UV HyperLogLog",
    "Redis HyperLogLog of the subtree's openids": "含下级的 openid 的 Redis HyperLogLog",
    "own UV HyperLogLog": "自身 UV HyperLogLog",
    "Redis HyperLogLog of the partner's own openids": "导流商自身 openid 的 Redis HyperLogLog",
    "daily statistic": "每日统计",
    "daily statistics": "每日统计",
    "reconcile drift": "对账偏差",
    "reconcile drifts": "对账偏差",
    "end must not be before start.": "end 不能早于 start。",
    "start..end may cover at most %(days)d days.": "start..end 最多跨 %(days)d 天。",
    "flush failed, the database is unavailable; Redis keeps every bucket: %(error)s": "落库失败，数据库不可用；Redis 保留了所有时段：%(error)s",
    "flush failed, Redis is unavailable: %(error)s": "落库失败，Redis 不可用：%(error)s",
    "partner is required with a portal token.": "使用门户令牌时必须提供 partner。",
    "start..end holds %(samples)d samples at precision %(precision)d, more than %(most)d: shorten the range or choose a coarser precision.": "start..end 在精度 %(precision)d 下有 %(samples)d 个样本，超过 %(most)d 个：请缩短范围或选择更粗的精度。",
}


def main() -> int:
    catalogue = polib.pofile(str(CATALOGUE))
    catalogue.metadata.update(
        {
            "Language": "zh_Hans",
            "Plural-Forms": "nplurals=1; plural=0;",
            "Content-Type": "text/plain; charset=UTF-8",
        }
    )
    catalogue.metadata_is_fuzzy = False  # msgfmt would skip a fuzzy header, and with it the charset
    unknown = []
    for entry in catalogue:
        if entry.obsolete:
            continue
        if entry.msgid in TERMS and (not entry.translated() or "fuzzy" in entry.flags):
            if entry.msgid_plural:
                entry.msgstr_plural = {0: TERMS[entry.msgid]}
            else:
                entry.msgstr = TERMS[entry.msgid]
        if "fuzzy" in entry.flags and entry.msgid in TERMS:
            entry.flags.remove("fuzzy")
            entry.previous_msgid = None
        if not entry.translated() or "fuzzy" in entry.flags:
            unknown.append(entry.msgid)
    catalogue.save()
    for msgid in unknown:
        print(f"untranslated: {msgid!r}")
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
