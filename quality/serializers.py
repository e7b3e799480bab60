"""The query parameters of the quality endpoints, one serializer per endpoint (see ``stats.read``)."""

from cpsproject.common.params import BusinessDayRangeQuery, QueryChoice, QueryText
from quality.models import Finding


class QualityQuery(BusinessDayRangeQuery):
    pass


class FindingsQuery(QualityQuery):
    partner = QueryText(required=False, help_text="A partner code: only its findings.")
    status = QueryChoice(
        choices=list(Finding.Status.values),
        required=False,
        help_text="Only findings open, cleared or confirmed.",
    )
