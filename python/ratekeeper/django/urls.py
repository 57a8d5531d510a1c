"""The staff page of the safelist and blocklist:
``path("ratekeeper/", include("ratekeeper.django.urls"))``."""

from django.urls import path

from ratekeeper.django import admin_views

app_name = "ratekeeper"

urlpatterns = [
    path("", admin_views.policies, name="policies"),
    path("add", admin_views.add_entry, name="add"),
    path("remove", admin_views.remove_entry, name="remove"),
    path("extend", admin_views.extend_entry, name="extend"),
    path("switches", admin_views.set_switches, name="switches"),
    path("key", admin_views.key_card, name="key"),
]
