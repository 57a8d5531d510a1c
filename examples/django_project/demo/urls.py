from django.contrib import admin
from django.urls import include, path

from demo import views

urlpatterns = [
    path("", views.home, name="home"),
    path("health", views.health, name="health"),
    path("api/items", views.api_items, name="api-items"),
    path("login", views.login, name="login"),
    path("report", views.async_report, name="report"),
    # staff: the admin site's login, and the safelist/blocklist page
    path("admin/", admin.site.urls),
    path("ratekeeper/", include("ratekeeper.django.urls")),
]
