"""The URLs of the conformance table's Django door: every path answers 200."""

from django.http import HttpResponse
from django.urls import re_path

urlpatterns = [re_path(r"", lambda request: HttpResponse(b"ok"))]
